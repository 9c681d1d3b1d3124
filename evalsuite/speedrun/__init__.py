"""`evalsuite speed TARGET`: a speed run of a target against its baseline, apart from the accuracy tasks.

`speed_target` resolves both targets (starting their rig servers when they
are rig targets), builds the workloads from the configured tasks' real text,
runs the interleaved design (`speedrun.run`), computes the figures
(`speedrun.analyze`) and writes the report folder (`speedrun.report`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from evalsuite.config import Config
from evalsuite.engines import make_engine
from evalsuite.errors import ConfigError
from evalsuite.report.folder import report_folder
from evalsuite.runner import plan_run
from evalsuite.speedrun.analyze import analyze
from evalsuite.speedrun.report import SpeedPaths, write_speed_report
from evalsuite.speedrun.run import ArmEndpoint, SpeedPlan, SpeedRecord, run_speed
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


@contextlib.contextmanager
def _servers(rigs: Sequence[str | None], slots: int, say: Callable[[str], None]) -> Iterator[list[str | None]]:
    """Base URLs for rig targets (started together, one request at a time so both may use both cores)."""
    names = [r for r in rigs if r is not None]
    if not names:
        yield [None] * len(rigs)
        return
    from evalsuite.speedrun.rigslots import serve_slots

    say(f"starting rig server(s) {', '.join(dict.fromkeys(names))} with {slots} slot(s)...")
    with serve_slots(names, slots, threads=2, progress=say) as urls:
        yield [urls[r] if r is not None else None for r in rigs]


def speed_target(
    config: Config,
    target_name: str,
    plan: SpeedPlan,
    *,
    data: DataChoice | None = None,
    out_dir: Path | None = None,
    seed: int = 0,
    rig_slots: int = 1,
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[SpeedPaths, dict]:
    """Measure TARGET against its baseline and write the report; returns its paths and the summary.

    `rig_slots` starts rig targets with that many slots (for the concurrency sweep); other targets are
    measured as they are served.
    """
    cand = config.target(target_name)
    if cand.baseline is None:
        raise ConfigError(
            f"Target '{target_name}' has no baseline in {config.path or 'the config'}; "
            f"set targets.{target_name}.baseline to the target it should be faster than."
        )
    base = config.target(cand.baseline)
    corpus, prompts = task_text(config, target_name, config.defaults.tasks, data)
    with _servers([base.rig, cand.rig], rig_slots, say) as urls:
        record = asyncio.run(
            _run(
                plan,
                [("baseline", base.name, base, urls[0]), ("candidate", cand.name, cand, urls[1])],
                corpus,
                prompts,
                say,
            )
        )
    summary = analyze(record.plan, record.servers, record.notes, record.measurements, seed=seed)
    summary["created"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    folder = out_dir or report_folder(config.root / config.defaults.reports_dir, f"{target_name}-speed")
    folder.mkdir(parents=True, exist_ok=True)
    return write_speed_report(summary, record.measurements, folder), summary


async def _run(
    plan: SpeedPlan, arms: list[tuple], corpus: str, prompts: list[str], say: Callable[[str], None]
) -> SpeedRecord:
    endpoints = [ArmEndpoint(role, name, make_engine(target, base_url=url)) for role, name, target, url in arms]
    try:
        return await run_speed(plan, endpoints, corpus, prompts, say)
    finally:
        for e in endpoints:
            await e.engine.aclose()
