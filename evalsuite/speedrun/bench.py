"""The servers of a speed run and its two designs: the baseline measured against one candidate after another.

`SpeedBench` starts the baseline's server as `eval` would (a rig
configuration, with the speed run's slots; a `serve` command; nothing for a
`base_url` target), builds the workloads on it once, and `measure(candidate)`
starts each candidate's server and measures the pair on those same prompts:

- together (the default): both servers up, every step sent to both arms back
  to back in alternating order, so drift on the machine falls on both;
- one at a time (`one_at_a_time`, for servers that cannot share the machine,
  such as two models on one GPU): the baseline alone first, its server then
  stopped, and each candidate alone afterwards.  The pairs share their
  prompts, not their moment, and the report says so.

Each server the bench started has its peak memory read (`serve.memory`) and
recorded beside its figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from evalsuite.config import Config, TargetConfig
from evalsuite.engines import make_engine
from evalsuite.serve.process import RunningServer
from evalsuite.speedrun.client import Measurement
from evalsuite.speedrun.run import (
    ArmEndpoint,
    Prepared,
    SpeedPlan,
    SpeedRecord,
    measure_arms,
    prepare,
    probe_arm,
    server_record,
    speed_client,
)
from evalsuite.speedrun.session import Session

T = TypeVar("T")
ONE_AT_A_TIME_NOTE = (
    "baseline and candidate were measured one after the other (one server at a time), not interleaved: each pair "
    "shares its prompt but not its moment, so drift on the machine between the two is not cancelled"
)


@contextlib.contextmanager
def target_server(
    config: Config, target: TargetConfig, slots: int, say: Callable[[str], None]
) -> Iterator[RunningServer | None]:
    """The server a target needs for a speed run, started for the block (None: the target's own base_url)."""
    if target.rig is not None:
        from evalsuite.speedrun.rigslots import serve_slots

        say(f"starting rig server '{target.rig}' for '{target.name}' with {slots} slot(s)...")
        threads = int(os.environ.get("EVALSUITE_RIG_THREADS") or 2)  # 1 on a busy machine, as for every rig server
        with serve_slots([target.rig], slots, threads=threads, extra_args=target.rig_args, progress=say) as running:
            yield running[target.rig]
    elif target.serve is not None:
        from evalsuite.serve.target import default_log_dir, serve_target

        with serve_target(target, config.root, default_log_dir(), say) as server:
            yield server
    else:
        yield None


def memory_record(server: RunningServer | None) -> dict[str, Any]:
    """A server's peak memory for the report (not measured for a server the suite did not start)."""
    if server is None:
        return {
            "peak_memory_mb": None,
            "gpu_memory_mb": None,
            "memory": "not measured: a server evalsuite did not start",
        }
    peak = server.memory_peak()
    return {"peak_memory_mb": peak.rss_mb, "gpu_memory_mb": peak.gpu_mb, "memory": peak.how}


async def _with_arms(
    specs: Sequence[tuple[str, TargetConfig, RunningServer | None]],
    work: Callable[[list[ArmEndpoint]], Coroutine[Any, Any, T]],
) -> T:
    arms = [ArmEndpoint(role, t.name, make_engine(t, base_url=s.base_url if s else None)) for role, t, s in specs]
    try:
        return await work(arms)
    finally:
        for arm in arms:
            await arm.engine.aclose()


class SpeedBench:
    """The baseline's server and workloads, held while candidates are measured against it (module docstring)."""

    def __init__(
        self,
        config: Config,
        baseline: TargetConfig,
        plan: SpeedPlan,
        *,
        corpus: str,
        prompts: Sequence[str],
        session: Session | None = None,
        slots: int = 1,
        one_at_a_time: bool = False,
        say: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.config, self.baseline, self.plan = config, baseline, plan
        self.corpus, self.prompts, self.session = corpus, prompts, session
        self.slots, self.one_at_a_time, self.say = slots, one_at_a_time, say
        self._stack = contextlib.ExitStack()
        self._server: RunningServer | None = None
        self._base: ArmEndpoint | None = None
        self._base_measurements: list[Measurement] = []
        self._base_memory: dict[str, Any] = {}
        self.prepared: Prepared | None = None

    def __enter__(self) -> SpeedBench:
        try:
            self._server = self._stack.enter_context(target_server(self.config, self.baseline, self.slots, self.say))
            asyncio.run(_with_arms([("baseline", self.baseline, self._server)], self._prepare))
            if self.one_at_a_time:
                self._stack.close()  # the baseline's server goes before any candidate's starts
                self._base_memory = memory_record(self._server)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    async def _prepare(self, arms: list[ArmEndpoint]) -> None:
        base = arms[0]
        await probe_arm(base, self.say)
        async with speed_client(base) as client:
            self.prepared = await prepare(client, self.plan, arms, self.corpus, self.prompts, self.session, self.say)
            if self.one_at_a_time:
                self._base_measurements = await measure_arms(client, self.plan, arms, self.prepared, self.say)
        self._base = base

    def measure(self, candidate: TargetConfig) -> SpeedRecord:
        """Start the candidate's server, measure it against the baseline on the prepared steps, stop it."""
        assert self.prepared is not None and self._base is not None, "use SpeedBench in a with block"
        prepared, base = self.prepared, self._base
        with target_server(self.config, candidate, self.slots, self.say) as server:
            specs = [("candidate", candidate, server)]
            if not self.one_at_a_time:
                specs.insert(0, ("baseline", self.baseline, self._server))
            arms, measurements = asyncio.run(_with_arms(specs, self._measure))
        memory = {"candidate": memory_record(server), "baseline": self._base_memory or memory_record(self._server)}
        notes = list(prepared.notes)
        if self.one_at_a_time:
            notes.append(ONE_AT_A_TIME_NOTE)
            measurements = self._base_measurements + measurements
        if not (base.engine.takes_ignore_eos and arms[-1].engine.takes_ignore_eos):
            notes.append(
                "an engine here takes no ignore_eos: outputs stop where the model stops, not at a fixed length"
            )
        servers = {"baseline": server_record(base), "candidate": server_record(arms[-1])}
        for role, record in servers.items():
            record.update(memory[role], one_at_a_time=self.one_at_a_time)
        return SpeedRecord(dict(prepared.plan), servers, notes, measurements)

    async def _measure(self, arms: list[ArmEndpoint]) -> tuple[list[ArmEndpoint], list[Measurement]]:
        assert self.prepared is not None and self._base is not None
        for arm in arms:
            if arm.role == "baseline":
                arm.model, arm.info = self._base.model, self._base.info
            else:
                await probe_arm(arm, self.say)
        async with speed_client(arms[0]) as client:
            return arms, await measure_arms(client, self.plan, arms, self.prepared, self.say)
