"""assign_roles: which run folder plays which role, from explicit roles first and the targets' recorded relations."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from evalsuite.compare.roles import StoredRun, assign_roles
from evalsuite.errors import ConfigError
from evalsuite.store.manifest import RunManifest

ROOT = Path("/runs")


def _run(target: str, baseline: str | None = None, control: str | None = None, *, repeat: int = 0) -> StoredRun:
    """A run of `target` whose target config names `baseline` and `control` (what `evalsuite run` records)."""
    return StoredRun(ROOT / f"{target}-{repeat}", target, "math500", repeat, baseline, control)


SPEC = _run("spec", "base", "self")  # the candidate: a speculative server whose baseline is "base"
BASE = _run("base")
SELF = _run("self", "base")  # the control: the same server drafting for itself, also measured against "base"
REPEAT = _run("base", repeat=1)


def _roles(positional: list[StoredRun], **explicit: list[StoredRun]) -> dict[str, str]:
    """role -> target name (with `+` for a repeat), for the one task."""
    by_folder = {r.folder: r.target + ("+" if r.repeat else "") for r in [*positional, *sum(explicit.values(), [])]}
    (roles,) = assign_roles(positional, explicit).values()
    return {role: by_folder[folder] for role, folder in roles.items()}


def _refusal(positional: list[StoredRun], **explicit: list[StoredRun]) -> str:
    with pytest.raises(ConfigError) as err:
        assign_roles(positional, explicit)
    return str(err.value)


@pytest.mark.parametrize("order", list(itertools.permutations([SPEC, BASE, SELF, REPEAT])))
def test_recorded_relations_place_every_run_in_any_order(order: tuple[StoredRun, ...]) -> None:
    assert _roles(list(order)) == {"candidate": "spec", "baseline": "base", "control": "self", "repeat": "base+"}


def test_runs_of_two_tasks_are_placed_per_task() -> None:
    gsm = [StoredRun(ROOT / f"gsm-{r.target}", r.target, "gsm8k", 0, r.baseline_of_target, None) for r in (SPEC, BASE)]
    folders = assign_roles([SPEC, BASE, *gsm])
    assert folders == {
        "math500": {"candidate": SPEC.folder, "baseline": BASE.folder},
        "gsm8k": {"candidate": gsm[0].folder, "baseline": gsm[1].folder},
    }


def test_one_positional_run_is_the_candidate_of_the_explicit_roles() -> None:
    other = _run("other")
    assert _roles([SPEC], baseline=[other], control=[BASE]) == {
        "baseline": "other",
        "control": "base",
        "candidate": "spec",
    }


def test_explicit_baseline_counts_as_given_when_the_candidate_is_picked() -> None:
    """`report SPEC SELF --baseline BASE`: SPEC's configured baseline was given, explicitly, so SPEC is the candidate."""
    assert _roles([SPEC, SELF], baseline=[BASE]) == {"baseline": "base", "candidate": "spec", "control": "self"}
    assert _roles([SELF, SPEC], baseline=[BASE]) == {"baseline": "base", "candidate": "spec", "control": "self"}


def test_explicit_control_is_not_overridden_by_the_configured_one() -> None:
    other = _run("other", "base")
    assert _roles([SPEC, BASE], control=[other]) == {"control": "other", "candidate": "spec", "baseline": "base"}
    assert "cannot tell which role /runs/self-0 (self) plays" in _refusal([SPEC, BASE, SELF], control=[other])


def test_a_given_candidate_takes_the_one_other_run_as_its_baseline() -> None:
    assert _roles([BASE], candidate=[SPEC]) == {"candidate": "spec", "baseline": "base"}


def test_the_configured_control_is_placed_before_the_leftovers() -> None:
    msg = _refusal([SPEC, BASE, SELF, _run("other")])
    assert "cannot tell which role /runs/other-0 (other) plays in this comparison" in msg


def test_given_candidate_and_baseline_leave_one_run_to_the_control() -> None:
    assert _roles([SELF], candidate=[SPEC], baseline=[BASE]) == {
        "candidate": "spec",
        "baseline": "base",
        "control": "self",
    }
    msg = _refusal([BASE, _run("other")], candidate=[SPEC])
    assert "cannot tell which role /runs/base-0 (base), /runs/other-0 (other) plays" in msg


def test_a_given_repeat_leaves_a_second_repeat_unplaced() -> None:
    msg = _refusal([SPEC, BASE, _run("base", repeat=2)], repeat=[REPEAT])
    assert "Task 'math500': cannot tell which role /runs/base-2 (base) plays" in msg


def test_a_given_repeat_does_not_stand_in_for_the_baseline() -> None:
    msg = _refusal([SPEC, SELF], repeat=[REPEAT])
    assert "Task 'math500': cannot tell the candidate among /runs/spec-0 (spec), /runs/self-0 (self): none" in msg


def test_the_baseline_target_is_read_from_the_given_baseline_only() -> None:
    odd = _run("x", repeat=1)  # a repeat of another target, given before the baseline
    assert _roles([SPEC, SELF], repeat=[odd], baseline=[BASE]) == {
        "repeat": "x+",
        "baseline": "base",
        "candidate": "spec",
        "control": "self",
    }


def test_one_unrelated_run_left_over_is_the_control() -> None:
    plain = _run("spec", "base")  # no control configured
    assert _roles([plain, BASE, _run("other")]) == {"candidate": "spec", "baseline": "base", "control": "other"}


def test_runs_left_without_a_role_are_named() -> None:
    msg = _refusal([SPEC, BASE, _run("x"), _run("y")])
    assert "Task 'math500': cannot tell which role /runs/x-0 (x), /runs/y-0 (y) plays in this comparison." in msg
    assert "evalsuite report CANDIDATE_RUN --baseline RUN" in msg
    assert "cannot tell which role /runs/base-1 (base), /runs/base-2 (base) plays" in _refusal(
        [SPEC, BASE, REPEAT, _run("base", repeat=2)]
    )


def test_the_candidate_must_be_the_one_run_whose_baseline_was_given() -> None:
    msg = _refusal([_run("x"), _run("y")])
    assert (
        "Task 'math500': cannot tell the candidate among /runs/x-0 (x), /runs/y-0 (y): none of them is a target whose"
        in msg
    )
    twin = StoredRun(ROOT / "twin", "twin", "math500", 0, "base", None)
    msg = _refusal([SPEC, twin, BASE])
    assert "cannot tell the candidate among /runs/spec-0 (spec), /runs/twin (twin), /runs/base-0 (base): " in msg
    assert ": 2 (spec, twin) of them is a target whose configured baseline was given." in msg


def test_a_run_named_as_another_runs_control_is_not_the_candidate() -> None:
    """SELF's baseline "base" is given too, but SPEC names "self" as its control."""
    assert _roles([SELF, BASE, SPEC])["candidate"] == "spec"


def test_the_candidates_baseline_must_be_given_once() -> None:
    msg = _refusal([SPEC])
    assert msg.startswith("Task 'math500' has no baseline run among the folders given for the candidate /runs/spec-0")
    base2 = StoredRun(ROOT / "base-again", "base", "math500", 0, None, None)
    msg = _refusal([SPEC, BASE, base2])
    assert "Task 'math500': 2 runs of 'spec''s baseline target 'base' were given; give exactly one." in msg


def test_a_task_without_candidate_or_baseline_is_refused() -> None:
    assert _refusal([], baseline=[BASE]).startswith("Task 'math500' has no candidate run among the folders given.")
    assert _refusal([], repeat=[REPEAT]).startswith("Task 'math500' has no candidate and no baseline run among")
    assert _refusal([_run("base", None, "x")]).startswith("Task 'math500' has no baseline run among the folders given")


def test_a_folder_given_twice_is_refused(tmp_path: Path) -> None:
    msg = _refusal([SPEC, SPEC, BASE])
    assert (
        msg
        == "/runs/spec-0 is given twice; a run compared with itself always looks lossless, so give each role its own run."
    )
    msg = _refusal([SPEC, BASE], baseline=[BASE])
    assert msg == (
        "/runs/base-0 is given twice (as baseline and as control); a run compared with itself always looks "
        "lossless, so give each role its own run."
    )
    (tmp_path / "run").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "run")
    same = [
        StoredRun(tmp_path / name, t, "math500", 0, b, None)
        for name, t, b in (("run", "spec", "base"), ("link", "base", None))
    ]
    assert "is given twice" in _refusal(same)


def test_two_runs_in_one_explicit_role_are_refused() -> None:
    other = _run("other")
    msg = _refusal([SPEC], baseline=[BASE, other])
    assert "Two baseline runs for task 'math500': /runs/base-0 and /runs/other-0; give one per task." in msg


def test_stored_run_reads_the_manifest() -> None:
    manifest = RunManifest.load(
        {
            "fingerprint": "f" * 64,
            "target": "spec",
            "task": "math500",
            "fingerprint_fields": {"repeat": 1},
            "target_config": {"baseline": "base", "control": "self"},
        }
    )
    assert StoredRun.from_manifest(ROOT / "r", manifest) == StoredRun(ROOT / "r", "spec", "math500", 1, "base", "self")
