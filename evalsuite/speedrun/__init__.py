"""`evalsuite speed TARGET`: a speed run of a target against its baseline, apart from the accuracy tasks.

`speed_target` resolves both targets, builds the workloads from the
configured tasks' real text (and a multi-turn session when asked), measures
the pair (`speedrun.bench`: servers started as `eval` starts them, both up
and interleaved, or one at a time), computes the figures
(`speedrun.analyze`) and writes the report folder (`speedrun.report`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evalsuite.config import Config
from evalsuite.errors import ConfigError
from evalsuite.report.folder import report_folder
from evalsuite.runner import plan_run
from evalsuite.speedrun.analyze import analyze
from evalsuite.speedrun.bench import SpeedBench
from evalsuite.speedrun.report import SpeedPaths, write_speed_report
from evalsuite.speedrun.run import SpeedPlan, SpeedRecord
from evalsuite.speedrun.session import Session
from evalsuite.tasks.data import DataChoice

__all__ = ["SpeedPlan", "SpeedPaths", "speed_target", "task_text"]


def task_text(config: Config, target: str, tasks: Sequence[str], data: DataChoice | None) -> tuple[str, list[str]]:
    """(corpus, prompts): every task's prompts and string references as one text, and the prompts round-robin."""
    per_task: list[list[str]] = []
    corpus: list[str] = []
    for task in tasks:
        plan = plan_run(config, target, task, data=data)
        prompts = ["\n\n".join(m["content"] for m in s.messages) for s in plan.samples]
        per_task.append(prompts)
        for s, prompt in zip(plan.samples, prompts):
            corpus.append(prompt)
            if isinstance(s.reference, str) and len(s.reference) > 40:
                corpus.append(s.reference)
    mixed = [p for group in zip(*per_task) for p in group] if per_task else []
    return "\n\n".join(corpus), mixed


def speed_target(
    config: Config,
    target_name: str,
    plan: SpeedPlan,
    *,
    data: DataChoice | None = None,
    out_dir: Path | None = None,
    seed: int = 0,
    rig_slots: int = 1,
    one_at_a_time: bool | None = None,
    session: Session | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[SpeedPaths, dict]:
    """Measure TARGET against its baseline and write the report; returns its paths and the summary.

    `rig_slots` starts rig targets with that many slots (for the concurrency sweep); `one_at_a_time`
    (default: the config's `defaults.one_server_at_a_time`) measures the baseline, then the candidate,
    instead of both up together.
    """
    cand = config.target(target_name)
    if cand.baseline is None:
        raise ConfigError(
            f"Target '{target_name}' has no baseline in {config.path or 'the config'}; "
            f"set targets.{target_name}.baseline to the target it should be faster than."
        )
    base = config.target(cand.baseline)
    from evalsuite.workflow import preflight_targets

    preflight_targets(config, [base.name, cand.name])
    corpus, prompts = task_text(config, target_name, config.defaults.tasks, data)
    alone = config.defaults.one_server_at_a_time if one_at_a_time is None else one_at_a_time
    with SpeedBench(
        config,
        base,
        plan,
        corpus=corpus,
        prompts=prompts,
        session=session,
        slots=rig_slots,
        one_at_a_time=alone,
        say=say,
    ) as bench:
        record = bench.measure(cand)
    summary = summarize(record, seed)
    folder = out_dir or report_folder(config.root / config.defaults.reports_dir, f"{target_name}-speed")
    folder.mkdir(parents=True, exist_ok=True)
    return write_speed_report(summary, record.measurements, folder), summary


def summarize(record: SpeedRecord, seed: int = 0) -> dict:
    """The speed run's figures (`speedrun.analyze`), stamped with the time they were computed."""
    summary = analyze(record.plan, record.servers, record.notes, record.measurements, seed=seed)
    summary["created"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return summary
