"""Roles belong to a comparison, not to a run folder.

A stored run is a target's outputs on a task; whether it is the baseline, the
candidate or a control depends on the comparison it is used in, so the same
folder can be the baseline here and a control there.

The roles, one word each, everywhere (CLI flags, `eval`'s output, reports,
comparison.json): `candidate`, `baseline`, `control` (the speculative server
with the target as its own drafter, which shows what engine numerics alone
do) and `repeat` (the baseline run again, which shows whether the engine is
deterministic).  The two control roles are also the kinds of control the
diff calibrates with (`CONTROL_ROLES`), so no mapping between names exists.

`assign_roles` places run folders for `evalsuite report`: roles given
explicitly (`--baseline`, `--control`, `--repeat`) first, then the relations
the targets' own config recorded (the candidate is the run whose target names
another given run's target as its baseline; its configured control is the
control; a repeat of a run is the repeat).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from evalsuite.diff.classify import ControlKind
from evalsuite.errors import ConfigError
from evalsuite.store.manifest import RunManifest

T = TypeVar("T")

CONTROL_ROLES: tuple[ControlKind, ...] = ("repeat", "control")
ROLES = ("candidate", "baseline", *CONTROL_ROLES)
SHOWN_ORDER = ("baseline", "repeat", "control", "candidate")
"""The order reports and comparison.json list a comparison's runs in: the reference first, the candidate last."""
_HINT = (
    "Name the roles explicitly: `evalsuite report CANDIDATE_RUN --baseline RUN [--control RUN] "
    "[--repeat RUN]` (once per task)."
)


def control_roles(roles: Mapping[str, T]) -> dict[ControlKind, T]:
    """The control runs among a comparison's runs by role (`repeat`, `control`), in that order."""
    return {role: roles[role] for role in CONTROL_ROLES if role in roles}


@dataclass(frozen=True)
class StoredRun:
    """What role assignment needs to know about one run folder."""

    folder: Path
    target: str
    task: str
    repeat: int
    baseline_of_target: str | None
    control_of_target: str | None

    @staticmethod
    def from_manifest(folder: Path, manifest: RunManifest) -> StoredRun:
        return StoredRun(
            folder=folder,
            target=manifest.target,
            task=manifest.task,
            repeat=manifest.fields.repeat,
            baseline_of_target=manifest.target_config.baseline,
            control_of_target=manifest.target_config.control,
        )


def assign_roles(
    positional: Sequence[StoredRun], explicit: Mapping[str, Sequence[StoredRun]] | None = None
) -> dict[str, dict[str, Path]]:
    """task -> role -> folder, with roles from `explicit` first and the recorded target relations for the rest."""
    folders: dict[str, dict[str, Path]] = {}
    seen: dict[Path, str] = {}
    for role, runs in (explicit or {}).items():
        for run in runs:
            _place(folders, seen, run, role)
    by_task: dict[str, list[StoredRun]] = {}
    once: set[Path] = set()
    for run in positional:
        key = run.folder.resolve()
        if key in once:
            raise ConfigError(
                f"{run.folder} is given twice; a run compared with itself always looks lossless, so "
                "give each role its own run."
            )
        once.add(key)
        by_task.setdefault(run.task, []).append(run)
    given = [run for runs in (explicit or {}).values() for run in runs]
    for task, runs in by_task.items():
        _infer(folders.setdefault(task, {}), runs, seen, task, given)
    for task, roles in folders.items():
        missing = [r for r in ("candidate", "baseline") if r not in roles]
        if missing:
            raise ConfigError(f"Task '{task}' has no {' and no '.join(missing)} run among the folders given. {_HINT}")
    return folders


def _place(folders: dict[str, dict[str, Path]], seen: dict[Path, str], run: StoredRun, role: str) -> None:
    roles = folders.setdefault(run.task, {})
    key = run.folder.resolve()
    if key in seen:
        raise ConfigError(
            f"{run.folder} is given twice (as {seen[key]} and as {role}); a run compared with "
            "itself always looks lossless, so give each role its own run."
        )
    if role in roles:
        raise ConfigError(f"Two {role} runs for task '{run.task}': {roles[role]} and {run.folder}; give one per task.")
    roles[role] = run.folder
    seen[key] = role


def _infer(
    roles: dict[str, Path], runs: list[StoredRun], seen: dict[Path, str], task: str, given: list[StoredRun]
) -> None:
    """Place one task's positional runs by the recorded target relations (`given`: the runs placed explicitly)."""
    folders = {task: roles}
    repeats = [r for r in runs if r.repeat]
    plain = [r for r in runs if not r.repeat]
    targets = {r.target for r in plain}
    taken = {role: folder for role, folder in roles.items()}
    base_target = _target_of(taken.get("baseline"), given)
    if "candidate" not in roles:
        cand = _pick_candidate(plain, targets | ({base_target} if base_target else set()), task)
        _place(folders, seen, cand, "candidate")
        plain = [r for r in plain if r is not cand]
        if "baseline" not in roles:
            base = [r for r in plain if r.target == cand.baseline_of_target]
            if not base and (cand.baseline_of_target is None or not plain):
                raise ConfigError(
                    f"Task '{task}' has no baseline run among the folders given for the candidate "
                    f"{cand.folder} ({cand.target}). {_HINT}"
                )
            if len(base) != 1:
                raise ConfigError(
                    f"Task '{task}': {len(base)} runs of '{cand.target}''s baseline target "
                    f"'{cand.baseline_of_target}' were given; give exactly one. {_HINT}"
                )
            _place(folders, seen, base[0], "baseline")
            plain.remove(base[0])
        ctl = [r for r in plain if cand.control_of_target and r.target == cand.control_of_target]
        if len(ctl) == 1 and "control" not in roles:
            _place(folders, seen, ctl[0], "control")
            plain.remove(ctl[0])
    elif "baseline" not in roles and len(plain) == 1:
        _place(folders, seen, plain.pop(), "baseline")
    if len(repeats) == 1 and "repeat" not in roles:
        _place(folders, seen, repeats.pop(), "repeat")
    if plain and "control" not in roles and len(plain) == 1 and roles.get("candidate") and roles.get("baseline"):
        _place(folders, seen, plain.pop(), "control")
    left = plain + repeats
    if left:
        names = ", ".join(f"{r.folder} ({r.target})" for r in left)
        raise ConfigError(f"Task '{task}': cannot tell which role {names} plays in this comparison. {_HINT}")


def _target_of(folder: Path | None, runs: list[StoredRun]) -> str | None:
    return next((r.target for r in runs if folder is not None and r.folder == folder), None)


def _pick_candidate(plain: list[StoredRun], present: set[str], task: str) -> StoredRun:
    """The run whose target's recorded baseline is among the runs, and that is not another run's baseline or control."""
    if len(plain) == 1:
        return plain[0]
    named = {r.baseline_of_target for r in plain} | {r.control_of_target for r in plain}
    found = [r for r in plain if r.baseline_of_target in present and r.target not in named]
    if len(found) == 1:
        return found[0]
    names = ", ".join(f"{r.folder} ({r.target})" for r in plain)
    what = "none" if not found else f"{len(found)} ({', '.join(r.target for r in found)})"
    raise ConfigError(
        f"Task '{task}': cannot tell the candidate among {names}: {what} of them is a target whose "
        f"configured baseline was given. {_HINT}"
    )
