"""The functional-call protocol, executor side: one call at a time, CPU-limited, size-capped, in order.

The runner inside the sandbox reads one request line per call from a pipe
and answers on another pipe with frames `<length>\\n<json>`.  Everything on
that pipe is the program's word, so the executor believes only what the
protocol allows:

- the first frame is `ready` (the solution was imported); a call is sent
  only after it, and call i+1 only after the reply to call i;
- any byte that arrives while no call is outstanding (a reply written ahead,
  before its call was asked) or a reply for the wrong call ends the run as a
  protocol violation: the remaining calls fail;
- each phase (the import, each call, and the program's exit after the last
  reply) gets `cpu_s` of CPU time (every process of the run counted) and
  `wall_s` of its own wall time (wall time less the time the run waited for
  a CPU), measured here, so a program that ignores signals, loops inside
  `try/except` or sleeps still fails the call; a phase the machine starved
  of CPU until `4 x wall_s` of wall time passed is stopped as `starved`;
- a frame longer than the call's cap is refused before anything is parsed,
  so parsing costs bounded memory and time; values come as tagged JSON
  (tuples, dicts, sets, big integers in hex) and decode with `json.loads`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsuite.sandbox.limits import STARVED_AFTER

MAX_DEPTH = 200


class Malformed(ValueError):
    """A reply value that is not valid tagged JSON."""


def decode_value(node: Any, depth: int = 0) -> Any:
    """Tagged JSON (see runner.encode) back into Python values."""
    if depth > MAX_DEPTH:
        raise Malformed("nested too deeply")
    if isinstance(node, list):
        return [decode_value(x, depth + 1) for x in node]
    if not isinstance(node, dict):
        return node
    if len(node) != 1:
        raise Malformed("an object that is not a tagged value")
    ((tag, body),) = node.items()
    if tag == "$x" and isinstance(body, str):
        try:
            return int(body, 16)
        except ValueError:
            raise Malformed("a bad hexadecimal integer") from None
    if tag == "$f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if not isinstance(body, list):
        raise Malformed(f"tag {tag[:10]!r} without a list")
    items = [decode_value(x, depth + 1) for x in body]
    try:
        if tag == "$t":
            return tuple(items)
        if tag == "$d":
            return {_hashable(k): v for k, v in (_pair(p) for p in items)}
        if tag == "$s":
            return {_hashable(x) for x in items}
        if tag == "$fs":
            return frozenset(_hashable(x) for x in items)
        if tag == "$c" and len(items) == 2:
            return complex(float(items[0]), float(items[1]))
        if tag == "$b" and len(items) == 1 and isinstance(items[0], str):
            return items[0].encode("latin-1")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise Malformed(str(exc)) from None
    raise Malformed(f"unknown tag {tag[:10]!r}")


def _pair(p: Any) -> tuple[Any, Any]:
    if not (isinstance(p, list) and len(p) == 2):
        raise Malformed("a dict entry that is not a pair")
    return p[0], p[1]


def _hashable(x: Any) -> Any:
    if isinstance(x, (list, dict, set)):
        raise Malformed("an unhashable key")
    return x


def parse_reply(payload: bytes) -> dict[str, Any]:
    """One reply frame's JSON (already size-capped) into {"i", "ok"|"error"}."""
    try:
        record = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(record, dict) or not isinstance(record.get("i"), int) or isinstance(record.get("i"), bool):
        raise Malformed("a reply without a call number")
    if "error" in record:
        return {"i": record["i"], "error": str(record["error"])[:2000]}
    if "unencodable" in record:
        return {"i": record["i"], "malformed": str(record["unencodable"])[:200]}
    if "ok" not in record:
        raise Malformed("a reply with neither a value nor an error")
    return {"i": record["i"], "ok": decode_value(record["ok"])}


@dataclass
class CallDriver:
    """State of the call protocol for one execution (used by the executor's pump)."""

    calls: Sequence[Sequence[str]]
    caps: Sequence[int]
    cpu_s: float
    wall_s: float
    results: list[dict[str, Any]] = field(default_factory=list)
    violation: str | None = None
    ready: bool = False
    outstanding: int | None = None
    exiting: bool = False
    started_cpu: float = 0.0
    started_wall: float = 0.0
    started_starved: float = 0.0
    buffer: bytearray = field(default_factory=bytearray)
    finished: bool = False

    def _start(self, cpu_now: float, now: float, starved: float) -> None:
        self.started_cpu, self.started_wall, self.started_starved = cpu_now, now, starved

    def request(self, i: int, cpu_now: float, now: float, starved: float = 0.0) -> bytes:
        self.outstanding = i
        self._start(cpu_now, now, starved)
        return (json.dumps({"i": i, "args": list(self.calls[i])}) + "\n").encode()

    def next_request(self, cpu_now: float, now: float, starved: float = 0.0) -> bytes | None:
        """The next call to send, or None when all are answered (the request pipe is closed; the exit phase starts)."""
        i = len(self.results)
        if i >= len(self.calls):
            self.exiting = True
            self._start(cpu_now, now, starved)
            return None
        return self.request(i, cpu_now, now, starved)

    def over_budget(self, cpu_now: float, now: float, starved: float = 0.0) -> str | None:
        """Why the phase under way must stop, or None: its CPU budget spent (`cpu`), its own wall time (wall
        less the run's wait for a CPU, `starved` seconds so far) spent (`wall`), or starved past `STARVED_AFTER` times that."""
        if self.finished:
            return None
        if cpu_now - self.started_cpu > self.cpu_s:
            return "cpu"
        wall = now - self.started_wall
        if wall - (starved - self.started_starved) > self.wall_s:
            return "wall"
        if wall > STARVED_AFTER * self.wall_s:
            return "starved"
        return None

    def overrun(self, why: str, cpu_now: float, now: float, starved: float = 0.0) -> None:
        """Record the phase under way as stopped; nothing after it runs."""
        i = self.outstanding if self.outstanding is not None else len(self.results)
        self.results.append(
            {
                "i": i,
                "timeout": why,
                "cpu_s": round(cpu_now - self.started_cpu, 3),
                "wall_s": round(now - self.started_wall, 3),
                "starved_s": round(starved - self.started_starved, 3),
                "during": "call" if self.outstanding is not None else "exit" if self.exiting else "import",
            }
        )
        self.finished = True

    def feed(self, chunk: bytes, cpu_now: float, now: float, starved: float = 0.0) -> list[bytes] | None:
        """Take reply bytes; returns requests to send, or None when the run must stop (see `violation`)."""
        self.buffer += chunk
        out: list[bytes] = []
        while True:
            newline = self.buffer.find(b"\n", 0, 24)
            if newline < 0:
                if len(self.buffer) >= 24:
                    self._violate("a reply frame without a length header")
                    return None
                return out
            header = bytes(self.buffer[:newline])
            if not header.isdigit():
                self._violate("a reply frame without a length header")
                return None
            size = int(header)
            cap = self.caps[self.outstanding] if self.outstanding is not None else 1024
            if size > cap:
                if self.outstanding is not None:
                    self.results.append({"i": self.outstanding, "oversize": size, "cap": cap})
                    self.finished = True
                    return None
                self._violate(f"a ready frame of {size} bytes")
                return None
            if len(self.buffer) < newline + 1 + size:
                return out
            payload = bytes(self.buffer[newline + 1 : newline + 1 + size])
            del self.buffer[: newline + 1 + size]
            if self.buffer:
                self._violate("bytes written ahead, before their call was asked")
                return None
            if not self._accept(payload, cpu_now, now):
                return None
            request = self.next_request(cpu_now, now, starved)
            return out + ([request] if request is not None else [b""])

    def _accept(self, payload: bytes, cpu_now: float, now: float) -> bool:
        if not self.ready:
            if payload != b'{"ready": true}':
                self._violate("a first frame that is not the ready signal")
                return False
            self.ready = True
            return True
        try:
            record = parse_reply(payload)
        except Malformed as exc:
            record = {"i": self.outstanding, "malformed": str(exc)}
        if record["i"] != self.outstanding:
            self._violate(f"a reply for call {record['i']} while call {self.outstanding} was asked")
            return False
        record["cpu_s"] = round(max(0.0, cpu_now - self.started_cpu), 4)
        record["wall_s"] = round(now - self.started_wall, 4)
        self.results.append(record)
        self.outstanding = None
        return True

    def _violate(self, why: str) -> None:
        self.violation = f"protocol violation: {why}"
        self.finished = True
        return None


def default_cap(expected_json: str, ceiling: int) -> int:
    """A reply cap from the expected output's size: four times it plus 4 KiB, at most `ceiling`."""
    return int(min(ceiling, 4 * len(expected_json.encode("utf-8", "replace")) + 4096))
