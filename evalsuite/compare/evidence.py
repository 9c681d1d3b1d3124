"""A control's evidence beyond one comparison: where the same engines flipped tokens on every stored task.

How far numerics move the gap between two tokens belongs to the engine, the model and their flags, not to
the task: a control run (the baseline again, or the target drafting for itself) flips tokens at the same
kind of gaps on MATH-500 as on GSM8K.  A task of five prompts may show its control no flip at a telling gap,
so a comparison's threshold counts the flips of every stored run of the control's engine, on any task and
from any command, each diffed against the stored run of the baseline's engine on the same prompts.  Then
`eval`, `compare`, `report` and the pytest gate judge the same runs alike: each reads the same store.

Two runs are of one engine when their fingerprint fields agree on everything but what a task sets (its name,
prompt template, data, `max_tokens` and stop strings) and the target's name.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsuite.diff.classify import NO_EVIDENCE, Evidence
from evalsuite.errors import EvalsuiteError
from evalsuite.store.fingerprint import fingerprint
from evalsuite.store.manifest import MANIFEST, RunManifest, read_manifest
from evalsuite.store.reader import RunReader

PROMPT_FIELDS = ("task", "prompt_template", "dataset")
TASK_PARAMS = ("max_tokens", "stop")


def engine_identity(manifest: RunManifest) -> str | None:
    """A hash of what a run's numerics depend on: its fingerprint fields without what a task sets; None when
    the manifest records no fields."""
    if manifest.fingerprint_fields is None:
        return None
    fields = manifest.fingerprint_fields.as_mapping()
    for key in (*PROMPT_FIELDS, "target"):
        fields.pop(key, None)
    fields["params"] = {k: v for k, v in fields.get("params", {}).items() if k not in TASK_PARAMS}
    return fingerprint(fields)


def _prompts(manifest: RunManifest) -> str:
    """What a task sets: two runs with the same are asked the same prompts the same way."""
    fields = manifest.fields.as_mapping()
    params = fields.get("params", {})
    return fingerprint({k: fields.get(k) for k in PROMPT_FIELDS} | {k: params.get(k) for k in TASK_PARAMS})


@dataclass(frozen=True)
class _Stored:
    folder: Path
    manifest: RunManifest
    engine: str | None


def _store_root(run: RunReader) -> Path | None:
    """The runs folder a run lives in (`<runs>/<target>/<task>/<id>`), or None for a run not on disk."""
    folder = run.folder
    if folder is None:
        return None
    root = Path(folder).resolve().parent.parent.parent
    return root if (root / run.manifest.target / run.manifest.task).is_dir() else None


def _stored(root: Path) -> Iterator[_Stored]:
    """Every readable run under `root`; a damaged one is passed over (listing it is `evalsuite runs`' job)."""
    for path in sorted(root.glob(f"*/*/*/{MANIFEST}")):
        try:
            manifest = read_manifest(path)
        except (EvalsuiteError, OSError):
            continue
        yield _Stored(path.parent.resolve(), manifest, engine_identity(manifest))


def stored_evidence(baseline: RunReader, control: RunReader) -> Evidence:
    """The flips of `control`'s engine against `baseline`'s on the other stored runs of their store: every pair
    of a run of each engine asked the same prompts, except the pair being compared."""
    root = _store_root(control) or _store_root(baseline)
    base_engine, control_engine = engine_identity(baseline.manifest), engine_identity(control.manifest)
    if root is None or base_engine is None or control_engine is None:
        return NO_EVIDENCE
    runs = list(_stored(root))
    own = {Path(str(r.folder)).resolve() for r in (baseline, control) if r.folder is not None}
    bases = {_prompts(r.manifest): r for r in runs if r.engine == base_engine}
    gaps: list[float] = []
    samples = 0
    tasks: list[str] = []
    for run in runs:
        if run.engine != control_engine or run.folder in own or _prompts(run.manifest) == _prompts(control.manifest):
            continue
        base = bases.get(_prompts(run.manifest))
        if base is None or base.folder in own:
            continue
        found = _flips(base.folder, run.folder)
        gaps += found[0]
        samples += found[1]
        tasks.append(run.manifest.task)
    return Evidence(tuple(gaps), samples, tuple(dict.fromkeys(tasks)))


_seen: dict[tuple[Any, ...], tuple[list[float], int]] = {}


def _flips(base_folder: Path, control_folder: Path) -> tuple[list[float], int]:
    """The gaps at which a stored control run diverged from a stored baseline run, and the samples compared
    (remembered for the process while neither run grows)."""
    from evalsuite.compare.walk import walk_runs
    from evalsuite.store import open_run

    base, control = open_run(base_folder), open_run(control_folder)
    try:
        ids = {"baseline": base.result_ids(), "candidate": control.result_ids()}
        key = (base_folder, len(ids["baseline"]), control_folder, len(ids["candidate"]))
        if key not in _seen:
            walk = walk_runs({"baseline": base, "candidate": control}, ids, {}, {})
            gaps = [d.gap for d in walk.diffs if not d.identical and math.isfinite(d.gap)]
            _seen[key] = (gaps, len(walk.diffs))
        return _seen[key]
    finally:
        base.close()
        control.close()
