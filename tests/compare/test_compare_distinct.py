"""check_distinct: the roles of one comparison hold different runs, and a control is not the candidate renamed."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from evalsuite.compare.distinct import check_distinct, endpoint_identity, normal_url
from evalsuite.errors import NotComparableError
from evalsuite.store import MemoryRun

URL = "http://127.0.0.1:8080/v1"
_made = itertools.count()


def _run(
    target: str,
    *,
    folder: Path | None = None,
    fingerprint: str | None = None,
    endpoint: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
) -> MemoryRun:
    fields: dict[str, Any] = {"target": target, "endpoint": endpoint if endpoint is not None else {"base_url": URL}}
    if engine is not None:
        fields["engine"] = engine
    manifest = {
        "fingerprint": fingerprint or f"{target}-run-{next(_made):016d}",
        "target": target,
        "task": "math500",
        "fingerprint_fields": fields,
    }
    return MemoryRun(manifest, {}, folder=folder)


def _distinct_endpoints() -> dict[str, MemoryRun]:
    return {
        "candidate": _run("spec", endpoint={"base_url": "http://127.0.0.1:8081/v1"}),
        "baseline": _run("base", endpoint={"base_url": "http://127.0.0.1:8080/v1"}),
    }


def _refusal(runs: dict[str, MemoryRun | None]) -> str:
    with pytest.raises(NotComparableError) as err:
        check_distinct(runs)
    msg = str(err.value)
    assert msg.startswith("A comparison needs different runs in its roles, and here ")
    assert msg.endswith("Pass the run of each role (candidate, baseline, and any control) from its own target.")
    return msg


def test_distinct_runs_pass_and_an_absent_role_is_skipped() -> None:
    runs: dict[str, MemoryRun | None] = {**_distinct_endpoints(), "control": None}
    check_distinct(runs)  # no run has a folder: runs kept in memory are never one run folder
    check_distinct({**_distinct_endpoints(), "repeat": _run("base", fingerprint="base-again-0123456789")})


def test_the_same_folder_in_two_roles_is_refused_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "run")
    runs = _distinct_endpoints()
    runs["candidate"].folder = tmp_path / "run"
    runs["baseline"].folder = tmp_path / "link"
    msg = _refusal(runs)
    assert f"the candidate run (spec, {tmp_path / 'run'}) and the baseline run are the same run folder" in msg


def test_a_role_outside_the_four_is_named_by_its_key(tmp_path: Path) -> None:
    runs = {**_distinct_endpoints(), "draft": _run("d", folder=tmp_path)}
    runs["baseline"].folder = tmp_path
    msg = _refusal(runs)
    assert "the baseline run (base, " in msg and "and draft are the same run folder" in msg
    msg = _refusal({"draft": _run("d", folder=tmp_path), "candidate": _run("spec", folder=tmp_path)})
    assert f"draft (d, {tmp_path}) and the candidate run are the same run folder" in msg


def test_a_copied_folder_is_the_same_run_by_fingerprint(tmp_path: Path) -> None:
    fp = "ab" * 32
    cand = _run("spec", folder=tmp_path / "a", fingerprint=fp, endpoint={"base_url": "http://h:1"})
    base = _run("base", fingerprint=fp)
    msg = _refusal({"candidate": cand, "baseline": base})
    assert (
        f"the candidate run (spec, {tmp_path / 'a'}) and the baseline run (base) are the same run "
        f"(fingerprint {fp[:16]}), one folder being a copy of the other"
    ) in msg
    assert f"fingerprint {fp[:17]}" not in msg


def test_a_control_of_the_candidate_target_is_refused() -> None:
    runs = {**_distinct_endpoints(), "control": _run("spec", endpoint={"base_url": "http://h:9"})}
    assert "the control is a run of the candidate target 'spec' itself" in _refusal(runs)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8081/v1", "http://localhost:8081/v1/", " HTTP://LocalHost:8081/V1 ", "http://[::1]:8081/v1"],
)
def test_a_control_asking_the_candidates_endpoint_is_the_candidate(url: str) -> None:
    runs = {**_distinct_endpoints(), "control": _run("twin", endpoint={"base_url": url})}
    msg = _refusal(runs)
    assert "the control (twin) asks the same endpoint the same way as the candidate (spec), so it is" in msg


def test_the_same_endpoint_asked_another_way_is_a_different_control() -> None:
    same_url = {"base_url": "http://127.0.0.1:8081/v1"}
    cand = _run("spec", endpoint=same_url, engine={"dialect": "vllm", "extra": {}})
    base = _run("base")
    for engine in ({"dialect": "sglang", "extra": {}}, {"dialect": "vllm", "extra": {"speculative": False}}):
        check_distinct({"candidate": cand, "baseline": base, "control": _run("self", endpoint=same_url, engine=engine)})
    ctl = _run("self", endpoint=same_url, engine={"dialect": "vllm", "extra": {}})
    assert "asks the same endpoint the same way" in _refusal({"candidate": cand, "baseline": base, "control": ctl})


def test_a_control_without_a_recorded_endpoint_is_not_matched_by_endpoint() -> None:
    cand = _run("spec", endpoint={})
    check_distinct({"candidate": cand, "baseline": _run("base"), "control": _run("self", endpoint={})})


def test_a_control_of_the_baseline_target_is_refused() -> None:
    runs = {**_distinct_endpoints(), "control": _run("base", endpoint={"base_url": "http://h:9"})}
    msg = _refusal(runs)
    assert "the control is a run of the baseline target 'base' itself, not the speculative server drafting" in msg


def test_a_repeat_of_the_candidate_target_is_refused() -> None:
    runs = {**_distinct_endpoints(), "repeat": _run("spec", fingerprint="spec-again-0123456789")}
    assert "the repeat is a run of the candidate target 'spec', not the baseline again" in _refusal(runs)


def test_every_problem_is_named_in_one_sentence() -> None:
    fp = "cd" * 32
    runs = {
        "candidate": _run("spec", fingerprint=fp),
        "baseline": _run("base"),
        "repeat": _run("x", fingerprint=fp),
    }
    msg = _refusal(runs)
    assert "the candidate run (spec) and the repeat run (x) are the same run" in msg
    runs = {**_distinct_endpoints(), "repeat": _run("spec", fingerprint="r" * 20), "control": _run("base")}
    msg = _refusal(runs)
    assert "here the repeat is a run of the candidate target 'spec', not the baseline again; the control is" in msg


def test_normal_url() -> None:
    assert normal_url(" HTTP://LOCALHOST:8080/v1/ ") == "http://127.0.0.1:8080/v1"
    assert normal_url("http://0.0.0.0:1//") == "http://127.0.0.1:1"
    assert normal_url("http://[::1]:2") == "http://127.0.0.1:2"
    assert normal_url("http://example.org/localhost") == "http://example.org/localhost"
    assert normal_url("http://h/APIX") == "http://h/apix"
    assert normal_url(None) is None


def test_endpoint_identity_names_a_rig_by_its_flags() -> None:
    rig = _run("x", endpoint={"rig": "qwen", "server_args": ["-fa", "on"]})
    assert endpoint_identity(rig) == endpoint_identity(
        _run("y", endpoint={"server_args": ["-fa", "on"], "rig": "qwen"})
    )
    assert endpoint_identity(rig) != endpoint_identity(_run("y", endpoint={"rig": "qwen", "server_args": ["-fa"]}))
    assert endpoint_identity(_run("z", endpoint={})) is None
    # only the URL is normalised: a rig's name is a name
    assert endpoint_identity(_run("a", endpoint={"rig": "Qwen/"})) != endpoint_identity(
        _run("b", endpoint={"rig": "qwen"})
    )
