"""A comparison needs different runs in its roles: a run compared with itself always looks lossless.

"Itself" has several faces, and each is refused with a sentence saying why:

- the same run folder (also through a symlink or `records.sqlite` path), or
  the same run under another path (a copied folder: equal fingerprints),
  in any two roles;
- a control that is the candidate: the same target, or the same
  endpoint asked the same way (URL or rig server command line, dialect, API
  and extra request fields), so it would agree with the candidate by
  construction;
- a control or a repeat that is really the candidate's target, and a
  control that is the baseline's target.

Two distinct runs of one target (the baseline and its repeat) are not the
same run: comparing them is exactly how determinism is measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalsuite.errors import NotComparableError
from evalsuite.store.reader import RunReader

ROLE_NAMES = {
    "candidate": "the candidate run",
    "baseline": "the baseline run",
    "control": "the control run",
    "repeat": "the repeat run",
}


def _folder(run: RunReader) -> Path | None:
    folder = run.folder
    if folder is None or not str(folder):
        return None
    try:
        return Path(folder).resolve()
    except OSError:
        return Path(folder).absolute()


def _fields(run: Any) -> Mapping[str, Any]:
    return run.manifest.fields.as_mapping()


def normal_url(url: Any) -> Any:
    if not isinstance(url, str):
        return url
    text = url.strip().rstrip("/").lower()
    for alias in ("://localhost", "://[::1]", "://0.0.0.0"):
        text = text.replace(alias, "://127.0.0.1")
    return text


def endpoint_identity(run: Any) -> tuple[Any, ...] | None:
    """What a run asked and how: endpoint (normalised URL, or rig and its flags) plus dialect, API and extra."""
    fields = _fields(run)
    endpoint = fields.get("endpoint")
    if not isinstance(endpoint, Mapping) or not endpoint:
        return None
    endpoint = {k: (normal_url(v) if k == "base_url" else v) for k, v in endpoint.items()}
    engine = fields.get("engine") if isinstance(fields.get("engine"), Mapping) else {}
    return (repr(sorted(endpoint.items())), repr(sorted((engine or {}).items())))


def _label(role: str, run: RunReader) -> str:
    target = run.manifest.target
    folder = run.folder
    return f"{ROLE_NAMES.get(role, role)} ({target}{', ' + str(folder) if folder else ''})"


def _same_run(a: tuple[str, Any], b: tuple[str, Any]) -> str | None:
    (role_a, run_a), (role_b, run_b) = a, b
    folder_a, folder_b = _folder(run_a), _folder(run_b)
    if folder_a is not None and folder_a == folder_b:
        return f"{_label(role_a, run_a)} and {ROLE_NAMES.get(role_b, role_b)} are the same run folder"
    fp_a, fp_b = run_a.manifest.fingerprint, run_b.manifest.fingerprint
    if fp_a and fp_a == fp_b:
        return (
            f"{_label(role_a, run_a)} and {_label(role_b, run_b)} are the same run (fingerprint "
            f"{str(fp_a)[:16]}), one folder being a copy of the other"
        )
    return None


def check_distinct(runs: Mapping[str, Any]) -> None:
    """Raise NotComparableError when two roles of one comparison hold the same run, or a control is the candidate.

    `runs` maps role ("candidate", "baseline", "control", "repeat") to a
    run with a `manifest` (and a `folder` when it is on disk).
    """
    items = [(role, run) for role, run in runs.items() if run is not None]
    problems: list[str] = []
    for i, first in enumerate(items):
        for second in items[i + 1 :]:
            same = _same_run(first, second)
            if same:
                problems.append(same)
    if not problems:
        problems = [p for p in (_role_problem(role, run, items) for role, run in items) if p]
    if problems:
        raise NotComparableError(
            "A comparison needs different runs in its roles, and here "
            + "; ".join(problems)
            + ". A run compared with itself always looks lossless, whatever the endpoint does. Pass the run of "
            "each role (candidate, baseline, and any control) from its own target."
        )


def _role_problem(role: str, run: Any, items: list[tuple[str, Any]]) -> str | None:
    """Why a control run cannot play its role next to this candidate and baseline, if it cannot."""
    cand = next((r for k, r in items if k == "candidate"), None)
    base = next((r for k, r in items if k == "baseline"), None)
    name = run.manifest.target
    if role == "control" and cand is not None:
        if name == cand.manifest.target:
            return f"the control is a run of the candidate target '{name}' itself"
        identity = endpoint_identity(run)
        if identity is not None and identity == endpoint_identity(cand):
            return (
                f"the control ({name}) asks the same endpoint the same way as the candidate "
                f"({cand.manifest.target}), so it is the candidate under another name"
            )
    if role == "control" and base is not None and name == base.manifest.target:
        return (
            f"the control is a run of the baseline target '{name}' itself, not the speculative "
            "server drafting for itself"
        )
    if role == "repeat" and cand is not None and name == cand.manifest.target:
        return f"the repeat is a run of the candidate target '{name}', not the baseline again"
    return None
