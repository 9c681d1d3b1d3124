"""The generate stage: ask an endpoint for every sample not yet in the run store.

Re-running the same command resumes: the fingerprint finds the same run
folder, and only samples without a stored record are requested.  A fatal
endpoint error (wrong model name, bad key) stops the run with the server's
message; transient ones are retried a bounded number of times.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from evalsuite import __version__
from evalsuite.collector import heap_frozen
from evalsuite.config import Config, TargetConfig
from evalsuite.engines import Engine, make_engine
from evalsuite.engines.retry import RequestFailed, RetriesExhausted, RetryPolicy, with_retries
from evalsuite.errors import EndpointError, HostError
from evalsuite.folders import folder_name
from evalsuite.heap import keep_freed_memory
from evalsuite.records import GenerationParams, Sample, SampleResult
from evalsuite.serialize import to_jsonable
from evalsuite.serve.process import RunningServer
from evalsuite.store import MANIFEST_VERSION, RunManifest, RunStore, fingerprint
from evalsuite.tasks.build import build_samples, prompt_template_digest
from evalsuite.tasks.data import DataChoice, DatasetIdentity, load_rows
from evalsuite.tasks.schema import TaskSpec
from evalsuite.tasks.spec import find_task

log = logging.getLogger(__name__)


@dataclass
class RunPlan:
    """Everything a run needs, resolved: which samples, with what parameters, against what."""

    target: TargetConfig
    task: TaskSpec
    samples: list[Sample]
    params: GenerationParams
    data: DatasetIdentity
    runs_dir: Path
    base_url: str | None = None
    server_args: list[str] | None = None
    repeat: int = 0  # 1 = the same run again (a determinism check), kept in its own folder
    model_files: dict[str, str] | None = None  # digests of the model files the server was started with

    def served_by(self, server: RunningServer | None) -> None:
        """Point the plan at a server the suite started, and record what it was started with."""
        if server is not None:
            self.base_url, self.server_args = server.base_url, list(server.args)
            self.model_files = dict(server.model_files) or None


@dataclass
class RunOutcome:
    store: RunStore
    requested: int
    recorded: int
    skipped: int
    warnings: list[str] = field(default_factory=list)
    saved: int = 0  # results of this session committed to the store

    @property
    def folder(self) -> Path:
        return self.store.folder


def plan_run(
    config: Config,
    target_name: str,
    task_name: str,
    *,
    data: DataChoice | None = None,
    data_path: str | None = None,
    limit: int | None = None,
    max_tokens: int | None = None,
    repeat: int = 0,
) -> RunPlan:
    """Resolve a target and a task into a plan (reads the dataset, not the endpoint)."""
    target = config.target(target_name)
    spec = find_task(task_name, config.root / "tasks")
    choice = data or config.defaults.data
    rows, identity = load_rows(spec, choice, root=config.root, path=data_path)
    samples = build_samples(spec, rows, source=f"{spec.name} ({identity.location})")
    if limit is not None:
        samples = samples[:limit]
    overrides = dict(spec.generation)
    if target.max_tokens is not None:
        overrides["max_tokens"] = min(target.max_tokens, overrides.get("max_tokens", config.defaults.max_tokens))
    if max_tokens is not None:
        overrides["max_tokens"] = max_tokens
    params = config.defaults.params(overrides)
    return RunPlan(target, spec, samples, params, identity, config.root / config.defaults.runs_dir, repeat=repeat)


def _endpoint_identity(plan: RunPlan) -> dict[str, Any]:
    target = plan.target
    if target.rig is not None:
        args = [a for a in (plan.server_args or []) if a]
        return {"rig": target.rig, "server_args": _without_ports(args)}
    serve = getattr(target, "serve", None)
    if serve is not None:  # the command as configured: "{port}" is stable across launches
        return {"serve": _without_ports(serve.argv())}
    return {"base_url": target.base_url}


def _endpoint_fields(plan: RunPlan) -> dict[str, Any]:
    """The endpoint's identity, with the contents of the model files its server was started with."""
    identity = _endpoint_identity(plan)
    if plan.model_files:  # a file changed in place (a retrained drafter) starts a new run
        names = [Path(k).name for k in plan.model_files]  # the rig's cache folder differs between machines
        keys = names if len(set(names)) == len(names) else list(plan.model_files)
        identity["model_files"] = dict(zip(keys, plan.model_files.values(), strict=True))
    return identity


def _without_ports(args: list[str]) -> list[str]:
    """Server command lines minus the loopback port, which changes from launch to launch."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--port", "--host"):
            skip = True
            continue
        out.append(Path(arg).name if "/" in arg else arg)
    return out


def fingerprint_fields(plan: RunPlan, probe: dict[str, Any]) -> dict[str, Any]:
    """The fields that change outputs; equal fields mean the same run."""
    stable_probe = {k: v for k, v in probe.items() if k not in ("base_url", "warnings", "models")}
    fields: dict[str, Any] = {
        "suite_version": __version__,
        "target": plan.target.name,
        "endpoint": _endpoint_fields(plan),
        "server": stable_probe,
        "engine": {"dialect": plan.target.engine, "api": plan.target.api, "extra": plan.target.extra},
        "task": plan.task.name,
        "prompt_template": prompt_template_digest(plan.task),
        "params": to_jsonable(plan.params),
        "dataset": to_jsonable(plan.data),
    }
    if plan.repeat:
        fields["repeat"] = plan.repeat
    return fields


def _manifest(plan: RunPlan, fields: dict[str, Any], probe: dict[str, Any]) -> RunManifest:
    target = plan.target.model_dump(exclude={"description"})
    return RunManifest.load(
        {
            "schema_version": MANIFEST_VERSION,
            "fingerprint": fingerprint(fields),
            "fingerprint_fields": fields,
            "target": plan.target.name,
            "task": plan.task.name,
            "created_at": time.time(),
            "suite_version": __version__,
            "target_config": target,  # api_key_env names a variable; the key itself is never stored
            "probe": probe,
            "server_args": plan.server_args,
            "grader": plan.task.grader.model_dump(),
            "strata": plan.task.strata,
            "host": {"python": sys.version.split()[0], "platform": platform.platform()},
        },
        f"the manifest of {plan.target.name}/{plan.task.name}",
    )


def run_folder(runs_dir: Path, target: str, task: str, fp: str) -> Path:
    """`runs/<target's folder name>/<task>/<fingerprint>`; a run stored under the target's raw name before
    folder names were made safe (`config.folder_name`) is found where it is, so it still resumes."""
    folder = runs_dir / folder_name(target) / task / fp[:16]
    legacy = runs_dir / target / task / fp[:16]
    return legacy if legacy != folder and (legacy / "manifest.json").is_file() else folder


async def execute(
    plan: RunPlan,
    *,
    engine: Engine | None = None,
    progress: Callable[[int, int], Any] | None = None,
    on_warning: Callable[[str], None] = log.warning,
) -> RunOutcome:
    """Generate every missing sample of the plan into its run store; returns what was done."""
    keep_freed_memory()  # responses' memory is reused, not mapped afresh each time (heap.py)
    with heap_frozen():  # what lives as long as the run is not walked by every full collection (collector.py)
        return await _execute(plan, engine, progress, on_warning)


async def _execute(
    plan: RunPlan, engine: Engine | None, progress: Callable[[int, int], Any] | None, on_warning: Callable[[str], None]
) -> RunOutcome:
    engine = engine or make_engine(plan.target, base_url=plan.base_url)
    try:
        probe = await engine.probe()
        for warning in probe.get("warnings", []):
            on_warning(warning)
        fields = fingerprint_fields(plan, probe)
        store = RunStore.create(
            run_folder(plan.runs_dir, plan.target.name, plan.task.name, fingerprint(fields)),
            _manifest(plan, fields, probe),
        )
        store.write_samples(plan.samples)
        _seed_identity(engine, store)
        done = store.done_ids()
        todo = [s for s in plan.samples if s.id not in done]
        outcome = RunOutcome(store, len(todo), 0, len(plan.samples) - len(todo), list(probe.get("warnings", [])))
        started = time.time()
        before = await engine.run_stats()
        status = "interrupted"

        def record_session(after: dict[str, float]) -> None:
            """Record how this session ended; a store that cannot take it (the disk that stopped the run) warns."""
            info = {
                "engine_stats_before": before,
                "engine_stats_after": after,
                "requested_ids": len(todo),
                "server_identity": engine.identity.known,
            }
            try:
                store.record_session(started, len(todo), outcome.saved, status, info)
            except HostError:
                if status == "complete":
                    raise
                log.warning("this session's summary was not recorded in the run store (the same failure)")

        try:
            await _generate_all(engine, plan, todo, store, outcome, progress)
            status = "complete"
        except EndpointError as exc:
            status = f"failed: {exc}"
            raise
        except HostError as exc:
            status = f"failed: {exc}"
            raise HostError(
                f"{exc} {outcome.saved} new samples were saved before it; re-run the same command to resume."
            ) from None
        finally:
            try:
                after = await _safe_stats(engine, STATS_S if status == "complete" else STOPPING_STATS_S)
            except asyncio.CancelledError:  # stopped while the counters were read: the session is still recorded
                record_session({})
                raise
            record_session(after)
        return outcome
    finally:
        await engine.aclose()


def _seed_identity(engine: Engine, store: RunStore) -> None:
    """A resumed run continues only with the server identity its earlier sessions stored."""
    for session in reversed(store.sessions()):
        known = (session.get("info") or {}).get("server_identity")
        if isinstance(known, dict) and known:
            engine.identity.seed(known, "the responses stored earlier in this run")
            return


STATS_S = 10.0
"""How long the engine's counters may take to read after a session that finished."""
STOPPING_STATS_S = 2.0
"""The same after a session that was stopped: a user who pressed Ctrl-C, perhaps at a hung server, waits for it."""


async def _safe_stats(engine: Engine, timeout: float) -> dict[str, float]:
    try:
        return await asyncio.wait_for(engine.run_stats(), timeout)
    except Exception:
        return {}


async def _generate_all(
    engine: Engine,
    plan: RunPlan,
    todo: list[Sample],
    store: RunStore,
    outcome: RunOutcome,
    progress: Callable[[int, int], Any] | None,
) -> None:
    policy = RetryPolicy(max_retries=plan.target.max_retries)
    queue: Iterable[Sample] = iter(todo)
    writer = store.writer(asyncio.get_running_loop())

    def on_retry(attempt: int, failure: RequestFailed) -> None:
        log.info("retrying after %s (attempt %d): %s", failure.kind, attempt, failure)

    async def worker() -> None:
        for sample in queue:  # a shared iterator: each sample is taken by exactly one worker
            try:
                completion, attempts = await with_retries(
                    partial(engine.generate, sample, plan.params), policy, on_retry=on_retry
                )
            except RequestFailed as failure:
                raise EndpointError(
                    f"Target '{plan.target.name}' refused sample {sample.id}: {failure}. "
                    f"Nothing was scored; {outcome.recorded} new samples were saved. Fix the target and re-run."
                ) from None
            except RetriesExhausted as exc:
                raise EndpointError(
                    f"Target '{plan.target.name}' kept failing on sample {sample.id}: {exc}. "
                    f"{outcome.recorded} new samples were saved; re-run the same command to resume."
                ) from None
            writer.put(SampleResult(sample.id, sample.task, sample.strata, completion, attempts, time.time()))
            del completion  # freed now, while its objects are still in the caches, not when the next one is read
            outcome.recorded += 1
            if progress is not None:
                progress(outcome.recorded, len(todo))

    workers = [asyncio.create_task(worker()) for _ in range(min(plan.target.concurrency, max(1, len(todo))))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()  # none puts a result after this, whether or not it has ended when the writer closes
        try:
            await asyncio.gather(*workers, return_exceptions=True)
        finally:  # a Ctrl-C arriving here, as the run ends, still commits what has arrived
            try:
                writer.close()
            finally:
                outcome.saved = writer.committed
