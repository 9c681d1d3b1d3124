"""lm-eval's own scoring of stored completions: its filters, then its `process_results`, per sample.

The grade stage never asks the endpoint, and never needs the dataset again:
each sample's reference is the lm-eval document its prompt was built from, so
the task is rebuilt over those documents alone.  The first filter pipeline
and the first metric of the task decide the status (lm-eval's per-sample
metrics for generative tasks are 0/1: exact match, math_verify, pass@1...);
every filter's output and every metric is kept in the grade's details.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evalsuite.errors import ConfigError
from evalsuite.graders import GradeInput
from evalsuite.lmeval.rows import make_task
from evalsuite.lmeval.select import Leaf, LMEvalOptions, leaves
from evalsuite.records import Grade, GradeStatus
from evalsuite.store.fingerprint import fingerprint


def scoring_task(leaf: Leaf, docs: list[dict[str, Any]]) -> Any:
    """The leaf's lm-eval task over already processed documents: filters and metrics as configured."""
    config = dict(leaf.config)
    config.update(
        process_docs=None,
        training_split=None,
        validation_split=None,
        fewshot_split=None,
        fewshot_config=None,
        test_split="test",
        num_fewshot=0,
    )
    rows = docs or [{}]

    def load(**_: Any) -> Any:
        import datasets

        return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})

    config["custom_dataset"] = load
    return make_task(config, leaf.name)


def score(task: Any, docs: list[dict[str, Any]], texts: list[str]) -> list[dict[str, dict[str, Any]]]:
    """lm-eval's filters over the responses, then its metrics: {filter: {"filtered": x, metric: value}} per doc."""
    from lm_eval.api.instance import Instance

    instances = [
        Instance("generate_until", doc, ("", {}), 0, (task.config.task, i, 1), resps=[text])
        for i, (doc, text) in enumerate(zip(docs, texts))
    ]
    for pipeline in task._filters:  # noqa: SLF001 - the task's configured filter pipelines, as evaluate() applies them
        pipeline.apply(instances)
    out = []
    for doc, inst in zip(docs, instances):
        per: dict[str, dict[str, Any]] = {}
        for name, filtered in inst.filtered_resps.items():
            try:
                metrics = task.process_results(doc, [filtered])
            except Exception as exc:  # noqa: BLE001 - one bad sample must not stop a run
                per[name] = {"filtered": _plain(filtered), "error": f"{type(exc).__name__}: {exc}"}
                continue
            per[name] = {"filtered": _plain(filtered), **{k: _plain(v) for k, v in metrics.items()}}
        out.append(per)
    return out


def _plain(value: Any) -> Any:
    """numpy scalars and other oddities as JSON values, so grades store cleanly."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _grade(item: GradeInput, scored: dict[str, dict[str, Any]]) -> Grade:
    details: dict[str, Any] = {"truncated": item.truncated, "lmeval": scored}
    primary = next(iter(scored))
    if "error" in scored[primary]:
        return Grade(
            item.sample.id, "ungraded", None, f"lm-eval scoring failed: {scored[primary]['error']}", 0.0, details
        )
    metrics = {k: v for k, v in scored[primary].items() if k != "filtered"}
    if not metrics:
        return Grade(item.sample.id, "ungraded", None, f"lm-eval filter '{primary}' gave no metric", 0.0, details)
    metric, value = next(iter(metrics.items()))
    if isinstance(value, bool) or isinstance(value, (int, float)):
        value = float(value)
    else:
        return Grade(
            item.sample.id, "ungraded", None, f"lm-eval metric '{metric}' is not a number per sample", 0.0, details
        )
    extracted = scored[primary]["filtered"]
    shown = None if extracted is None else str(extracted)
    status: GradeStatus = "correct" if value >= 1.0 else "incorrect"
    return Grade(item.sample.id, status, shown, f"lm-eval {primary}/{metric} = {value:g}", value, details)


class LMEvalGrader:
    """Grades with the lm-eval task the run's prompts came from (named in the task spec's grader options)."""

    name = "lmeval"

    def __init__(self, extraction: Sequence[str] = (), *, lmeval: dict[str, Any], identity: dict[str, Any]) -> None:
        if extraction:
            raise ConfigError("Grader 'lmeval' scores with the lm-eval task's own filters; remove 'extraction'.")
        self.options = LMEvalOptions.model_validate(lmeval)
        self.identity = identity
        self.version = f"lm-eval-{identity.get('lm_eval')}+{fingerprint(identity.get('tasks', {}))[:12]}"

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order: items are scored per lm-eval task, in one pass each."""
        from evalsuite.lmeval.select import config_hash

        by_leaf = {leaf.name: leaf for leaf in leaves(self.options, _root())}
        groups: dict[str, list[int]] = defaultdict(list)
        for i, item in enumerate(items):
            groups[item.sample.strata.get("lmeval_task", "")].append(i)
        out: list[Grade | None] = [None] * len(items)
        for name, indexes in groups.items():
            leaf = by_leaf.get(name)
            if leaf is None:
                for i in indexes:
                    out[i] = Grade(
                        items[i].sample.id, "ungraded", None, f"lm-eval task '{name}' is not in this selection", 0.0
                    )
                continue
            recorded = self.identity.get("tasks", {}).get(name, {}).get("config")
            if recorded is not None and recorded != config_hash(leaf.config):
                raise ConfigError(
                    f"lm-eval task '{name}' changed since this run was made (config {recorded} then, "
                    f"{config_hash(leaf.config)} now); install lm_eval=={self.identity.get('lm_eval')} to re-grade it."
                )
            docs = [items[i].sample.reference for i in indexes]
            task = scoring_task(leaf, docs)
            for i, scored in zip(indexes, score(task, docs, [items[i].text or "" for i in indexes])):
                try:
                    out[i] = _grade(items[i], scored)
                except Exception as exc:  # noqa: BLE001 - one bad sample must not stop a run
                    out[i] = Grade(items[i].sample.id, "ungraded", None, f"grader error: {exc}", 0.0)
        return [g for g in out if g is not None]


def _root() -> Any:
    from pathlib import Path

    return Path.cwd()
