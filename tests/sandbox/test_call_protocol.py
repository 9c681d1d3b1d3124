"""The executor's side of the call protocol, without a sandbox: order, caps before parsing, tagged values."""

from __future__ import annotations

import json

import pytest

from evalsuite.sandbox.calls import CallDriver, Malformed, decode_value, default_cap, parse_reply


def frame(record: object) -> bytes:
    data = json.dumps(record).encode()
    return b"%d\n" % len(data) + data


def driver(n: int = 2, cap: int = 1000) -> CallDriver:
    return CallDriver(calls=[("1",)] * n, caps=[cap] * n, cpu_s=1.0, wall_s=5.0)


def test_calls_are_asked_one_at_a_time_after_ready() -> None:
    d = driver()
    first = d.feed(frame({"ready": True}), 0.0, 0.0)
    assert first == [b'{"i": 0, "args": ["1"]}\n']
    assert d.feed(frame({"i": 0, "ok": 2}), 0.1, 0.1) == [b'{"i": 1, "args": ["1"]}\n']
    assert d.feed(frame({"i": 1, "ok": [1, {"$t": [2]}]}), 0.2, 0.2) == [b""]  # b"": close the requests
    assert [r.get("ok") for r in d.results] == [2, [1, (2,)]] and d.violation is None


@pytest.mark.parametrize(
    "stream, why",
    [
        (frame({"ready": True}) + frame({"i": 0, "ok": 2}), "written ahead"),
        (frame({"i": 0, "ok": 2}), "not the ready signal"),
        (b"x" * 30, "length header"),
    ],
)
def test_frames_the_protocol_does_not_allow_end_the_run(stream: bytes, why: str) -> None:
    d = driver()
    assert d.feed(stream, 0.0, 0.0) is None
    assert d.violation and why in d.violation and d.results == []


def test_a_reply_for_another_call_is_refused() -> None:
    d = driver()
    d.feed(frame({"ready": True}), 0.0, 0.0)
    assert d.feed(frame({"i": 1, "ok": 2}), 0.0, 0.0) is None
    assert "call 1 while call 0" in (d.violation or "")


def test_oversized_reply_is_refused_from_its_header_alone() -> None:
    d = driver(cap=100)
    d.feed(frame({"ready": True}), 0.0, 0.0)
    assert d.feed(b"999999999999\n[1, 2", 0.0, 0.0) is None  # nothing of the body is kept or parsed
    assert d.results == [{"i": 0, "oversize": 999999999999, "cap": 100}] and len(d.buffer) < 64


def test_cpu_and_wall_budgets_per_phase() -> None:
    d = driver()
    assert d.over_budget(1.5, 0.0) == "cpu"  # the import phase has its own budget
    d.feed(frame({"ready": True}), 0.2, 0.2)
    assert d.over_budget(1.1, 0.3) is None and d.over_budget(1.3, 0.3) == "cpu" and d.over_budget(0.3, 6.0) == "wall"
    d.overrun("cpu", 1.3, 0.3)
    assert d.results[-1]["timeout"] == "cpu" and d.results[-1]["during"] == "call" and d.finished


def test_a_phase_wall_limit_counts_only_the_programs_own_time() -> None:
    """Wall time spent waiting for a CPU (`starved`) is the machine's: it does not use up the wall limit."""
    d = driver()
    d.feed(frame({"ready": True}), 0.0, 0.0, 1.0)  # call 0 asked at t=0, the run starved 1 s so far
    assert d.over_budget(0.1, 9.0, 6.0) is None  # 9 s of wall, 5 of them waiting for a CPU: 4 s its own
    assert d.over_budget(0.1, 9.0, 4.0) == "wall"  # 6 s its own: it slept or blocked
    assert d.over_budget(0.1, 19.5, 18.0) is None  # 19.5 s of wall, 2.5 s its own: not yet past 4 x the limit
    assert d.over_budget(0.1, 21.0, 19.5) == "starved"  # past 4 x the limit, starved nearly throughout
    d.overrun("starved", 0.1, 21.0, 19.5)
    record = {"i": 0, "timeout": "starved", "cpu_s": 0.1, "wall_s": 21.0, "starved_s": 18.5, "during": "call"}
    assert d.results[-1] == record


def test_the_exit_after_the_last_reply_is_a_phase_with_the_same_limits() -> None:
    d = driver(n=1)
    d.feed(frame({"ready": True}), 0.0, 0.0)
    assert d.feed(frame({"i": 0, "ok": 2}), 0.1, 1.0) == [b""] and d.exiting
    assert d.over_budget(0.2, 5.9) is None and d.over_budget(0.2, 6.1) == "wall"
    d.overrun("wall", 0.2, 6.1)
    assert (d.results[-1]["i"], d.results[-1]["during"]) == (1, "exit")


@pytest.mark.parametrize(
    "node, value",
    [
        ({"$x": "ff"}, 255),
        ({"$f": "nan"}, "nan"),
        ({"$s": [1, 2]}, {1, 2}),
        ({"$fs": []}, frozenset()),
        ({"$d": [[1, "a"], [{"$t": [1]}, 2]]}, {1: "a", (1,): 2}),
        ({"$b": ["\u00ff"]}, b"\xff"),
        ({"$c": [1, 2]}, 1 + 2j),
    ],
)
def test_tagged_values_decode(node: object, value: object) -> None:
    got = decode_value(node)
    assert (got != got) if value == "nan" else got == value


@pytest.mark.parametrize(
    "node", [{"a": 1}, {"$d": [[[1], 2]]}, {"$x": "zz"}, {"$q": []}, {"$t": 1}, json.loads("[" * 300 + "]" * 300)]
)
def test_malformed_values_are_refused_not_crashed_on(node: object) -> None:
    with pytest.raises(Malformed):
        decode_value(node)


def test_parse_reply_and_caps() -> None:
    assert parse_reply(b'{"i": 0, "error": "ValueError: x"}') == {"i": 0, "error": "ValueError: x"}
    assert parse_reply(b'{"i": 0, "unencodable": "returned a object"}')["malformed"]
    for bad in (b"[1]", b'{"i": true, "ok": 1}', b"\xff", b'{"i": 0}', b"9" * 5000):
        with pytest.raises(Malformed):
            parse_reply(bad)
    assert default_cap("[1, 2]", 1 << 20) == 4 * 6 + 4096 and default_cap("x" * 10**6, 1000) == 1000
