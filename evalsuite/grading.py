"""The grade stage: score every stored completion of a run, without asking the endpoint."""

from __future__ import annotations

from pathlib import Path

from evalsuite.errors import StoreError
from evalsuite.graders import GradeInput, get_grader
from evalsuite.records import Grade
from evalsuite.store import RunStore
from evalsuite.tasks.spec import GraderSpec, load_task_spec, locate_task


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


def grade_run(store: RunStore, *, tasks_dir: Path | None = None, workers: int | None = None) -> list[Grade]:
    """Grade all stored results and replace the run's grades; returns them in store order."""
    spec = grader_spec_for(store, tasks_dir)
    grader = get_grader(spec)
    samples = store.samples()
    results = list(store.iter_results(strings="none"))
    items = [GradeInput(samples[r.sample_id], r.completion.answer_text, r.completion.truncated) for r in results]
    grades = grader.grade_batch(items, workers=workers) if items else []
    store.write_grades(grades, grader.name, grader.version)
    return grades
