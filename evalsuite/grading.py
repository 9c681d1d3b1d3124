"""The grade stage: score every stored completion of a run, without asking the endpoint.

Each distinct (grader, grader version, reference, answer) is graded once:
grades are looked up in the grade cache shared by the runs folder
(`evalsuite.graders.cache`), the items it lacks are graded together (each
distinct key once, whatever number of samples share it), and the final
grades are stored back for the other arms and later re-grades.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalsuite.errors import StoreError
from evalsuite.graders import GradeInput, Grader, get_grader
from evalsuite.graders.cache import GradeCache, GradingCount, cache_path, grade_key, open_cache
from evalsuite.records import Grade
from evalsuite.sandbox.levels import requested
from evalsuite.serialize import to_jsonable
from evalsuite.store import RunStore
from evalsuite.tasks.schema import GraderSpec
from evalsuite.tasks.spec import load_task_spec, locate_task


@dataclass(frozen=True)
class Graded:
    """A run's grades in store order, and how many came from the cache instead of the grader."""

    grades: list[Grade]
    count: GradingCount


def grader_spec_for(store: RunStore, tasks_dir: Path | None = None) -> GraderSpec:
    """The task's current grader when its spec is at hand (so fixes re-grade old runs), else the recorded one."""
    task = store.manifest.task
    path = locate_task(task, tasks_dir) if tasks_dir is not None else None
    if path is not None:
        return load_task_spec(path).grader
    if store.manifest.grader is None:
        raise StoreError(
            f"{store.folder}: the run's manifest records no grader and tasks/{task}.yaml is not at hand; "
            "run `evalsuite grade` from the project folder that has the task."
        )
    return GraderSpec.model_validate(store.manifest.grader)


def item_key(grader: Grader, item: GradeInput) -> Any:
    """What the grader's grade of `item` depends on: its own `grading_key`, else the sample (less its id) and text."""
    own = getattr(grader, "grading_key", None)
    if own is not None:
        return own(item)
    sample = replace(item.sample, id="", task="")
    return {"sample": to_jsonable(sample), "text": item.text, "truncated": item.truncated}


def grade_items(
    grader: Grader,
    spec: GraderSpec,
    items: Sequence[GradeInput],
    cache: GradeCache | None,
    *,
    workers: int | None = None,
) -> tuple[list[Grade], int, int]:
    """Grades of `items` in order, and (gradings run, grades reused): each distinct key is graded once."""
    identity = {"spec": spec.model_dump(mode="json"), "grader": grader.name, "version": grader.version}
    keys = [grade_key(identity, item_key(grader, item)) for item in items]
    known = cache.get(keys) if cache is not None else {}
    todo = {key: item for key, item in zip(keys, items) if key not in known}
    fresh = dict(zip(todo, grader.grade_batch(list(todo.values()), workers=workers))) if todo else {}
    if cache is not None and fresh:
        cache.put(fresh, grader.name, grader.version)
        fresh.update(cache.get(k for k, g in fresh.items() if g.status != "ungraded"))  # the first stored wins
    reused = sum(key in known for key in keys)
    grades = [replace(known.get(key) or fresh[key], sample_id=item.sample.id) for key, item in zip(keys, items)]
    return grades, len(todo), reused


def grade_store(
    store: RunStore,
    *,
    tasks_dir: Path | None = None,
    workers: int | None = None,
    cache: bool = True,
    sandbox: str = "auto",
) -> Graded:
    """Grade all stored results, through the runs folder's grade cache unless `cache` is False, and replace
    the run's grades.  `sandbox` is the sandbox setting for model-written code (evalsuite/sandbox/levels.py);
    each code grade records the level it ran at."""
    with requested(sandbox):
        return _grade_store(store, tasks_dir, workers, cache)


def _grade_store(store: RunStore, tasks_dir: Path | None, workers: int | None, cache: bool) -> Graded:
    spec = grader_spec_for(store, tasks_dir)
    grader = get_grader(spec)
    samples = store.samples()
    results = list(store.iter_results(strings="none"))
    items = [GradeInput(samples[r.sample_id], r.completion.answer_text, r.completion.truncated) for r in results]
    where = cache_path(store.folder, store.manifest.target, store.manifest.task) if cache else None
    shared = open_cache(where)
    try:
        grades, graded, reused = grade_items(grader, spec, items, shared, workers=workers)
        count = GradingCount(len(items), graded, reused)
        store.write_grades(grades, grader.name, grader.version)
        if shared is not None:
            shared.record(store.folder, grader.name, grader.version, count)
    finally:
        if shared is not None:
            shared.close()
    return Graded(grades, count)


def grade_run(
    store: RunStore, *, tasks_dir: Path | None = None, workers: int | None = None, sandbox: str = "auto"
) -> list[Grade]:
    """Grade all stored results and replace the run's grades; returns them in store order."""
    return grade_store(store, tasks_dir=tasks_dir, workers=workers, sandbox=sandbox).grades
