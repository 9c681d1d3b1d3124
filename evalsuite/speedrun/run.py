"""The speed run's design: warm-up, then baseline and candidate interleaved on identical prompts.

Every step sends the same prompt(s) to both arms back to back, the order
alternating from step to step (ABBA), so drift on a shared machine (another
job starting, a thermal limit) falls on both arms alike and a paired ratio
cancels it.  Steps cycle through every input length (concurrency 1), the
concurrency sweep at one length (levels above the servers' slot count are
skipped: there they would measure queueing, not batching), the real tasks'
prompts, and the turns of a multi-turn session (`speedrun.session`), one
repetition at a time.

`prepare` builds the steps once, from the baseline's server (its tokenizer
cuts the prompts); `measure_arms` runs them on whichever arms are up: both
together (interleaved), or one arm at a time for servers that cannot share
the machine, on the very same prompts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from evalsuite.engines import Engine
from evalsuite.records import GenerationParams, Sample
from evalsuite.serialize import to_jsonable
from evalsuite.speedrun.client import Measurement, measure
from evalsuite.speedrun.session import Session, turn_workload
from evalsuite.speedrun.workload import PromptMaker, ServerInfo, Tokenizer, cap_lengths, server_info


@dataclass(frozen=True)
class SpeedPlan:
    """What to measure; the defaults are the issue's grid."""

    lengths: tuple[int, ...] = (128, 1024, 4096, 16384)
    output_tokens: int = 128
    reps: int = 5
    warmup: int = 2
    concurrency: tuple[int, ...] = (1, 2, 4, 8)
    sweep_length: int = 1024
    task_prompts: int = 6
    session_turns: int | None = None
    """Turns of the session workload to run (None: all of them; no session: none)."""


@dataclass
class ArmEndpoint:
    """One side of the comparison: its role, target name and engine adapter (already pointed at the server)."""

    role: str
    target: str
    engine: Engine
    info: ServerInfo | None = None
    model: str = ""


@dataclass
class SpeedRecord:
    """Everything a speed run measured: the plan actually run, the servers, notes and every request."""

    plan: dict[str, Any]
    servers: dict[str, dict[str, Any]]
    notes: list[str]
    measurements: list[Measurement] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    workload: str
    input_tokens: int
    concurrency: int
    rep: int
    texts: tuple[str, ...]
    fixed_output: bool
    turn: int | None = None
    """A session turn: its request is the arm's own history so far, then this turn's text."""


def _body(
    arm: ArmEndpoint, text: str, plan: SpeedPlan, fixed: bool, messages: tuple[dict[str, str], ...] = ()
) -> dict[str, Any]:
    params = GenerationParams(max_tokens=plan.output_tokens, top_logprobs=0)
    sample = Sample("speed", "speed", messages or ({"role": "user", "content": text},), None)
    body = arm.engine.request_body(sample, params)
    if fixed and arm.engine.takes_ignore_eos:
        body["ignore_eos"] = True
    return body


def _url(arm: ArmEndpoint) -> str:
    return arm.engine.base_url + ("/chat/completions" if arm.engine.target.api == "chat" else "/completions")


History = dict[tuple[str, int], list[dict[str, str]] | None]
"""(arm role, rep) -> the session's messages so far on that arm (None once a turn of it failed)."""


async def _step(
    client: httpx.AsyncClient, arm: ArmEndpoint, step: Step, plan: SpeedPlan, session: Session | None, history: History
) -> list[Measurement]:
    """One arm's requests of a step, concurrently; vLLM's speculative counters are read around them."""
    if step.turn is not None:
        return [await _turn(client, arm, step, plan, session, history)]
    before = await arm.engine.run_stats()  # engines without server counters answer {} without a request
    jobs = [
        measure(
            client,
            _url(arm),
            _body(arm, text, plan, step.fixed_output),
            Measurement(arm.role, step.workload, step.concurrency, step.rep, slot),
        )
        for slot, text in enumerate(step.texts)
    ]
    out = list(await asyncio.gather(*jobs))
    if before and out:
        after = await arm.engine.run_stats()
        out[0].counters = {k: max(0.0, v - before.get(k, 0.0)) for k, v in after.items()}
    return out


async def _turn(
    client: httpx.AsyncClient, arm: ArmEndpoint, step: Step, plan: SpeedPlan, session: Session | None, history: History
) -> Measurement:
    """One session turn on one arm: its own history, then the turn; the answer joins the history."""
    assert session is not None and step.turn is not None
    record = Measurement(arm.role, step.workload, 1, step.rep, 0)
    past = history.setdefault((arm.role, step.rep), [])
    if past is None:
        record.error = "an earlier turn of this session failed on this arm, so this turn has no history to build on"
        return record
    before = await arm.engine.run_stats()
    messages = session.messages(past, step.turn)
    record = await measure(client, _url(arm), _body(arm, "", plan, False, messages), record, keep_text=True)
    if before:
        after = await arm.engine.run_stats()
        record.counters = {k: max(0.0, v - before.get(k, 0.0)) for k, v in after.items()}
    if record.error is None:
        past += [messages[-1], {"role": "assistant", "content": record.text}]
    else:
        history[(arm.role, step.rep)] = None
    return record


async def plan_steps(
    plan: SpeedPlan,
    maker: PromptMaker,
    lengths: Sequence[int],
    levels: Sequence[int],
    sweep_length: int,
    tasks: Sequence[str],
    session: Session | None = None,
) -> list[Step]:
    """Every step in the order it runs: repetition by repetition, each through lengths, sweep, a task prompt and
    the session's turns."""
    steps: list[Step] = []
    for rep in range(max(plan.reps, len(tasks) if tasks else 0)):
        if rep < plan.reps:
            for length in lengths:
                text, _ = await maker.window(length, 7919 * rep + 104729 * length)
                steps.append(Step(f"in-{length}", length, 1, rep, (text,), True))
            for c in levels:
                if c == 1 and sweep_length in lengths:
                    continue  # the length sweep already measured it
                texts = tuple(
                    [
                        (await maker.window(sweep_length, 7919 * (rep * 16 + s) + 104729 * sweep_length + 31 * c))[0]
                        for s in range(c)
                    ]
                )
                steps.append(Step(f"in-{sweep_length}", sweep_length, c, rep, texts, True))
        if rep < len(tasks):
            steps.append(Step("tasks", 0, 1, rep, (tasks[rep],), False))
        if session is not None and rep < plan.reps:
            for turn, text in enumerate(session.turns):
                steps.append(Step(turn_workload(turn), 0, 1, rep, (text,), False, turn))
    return steps


@dataclass
class Prepared:
    """What every arm of a speed run is measured on: the steps (prompts fixed), warm-up prompts, the plan as run."""

    steps: list[Step]
    warmup: list[str]
    plan: dict[str, Any]
    notes: list[str]
    session: Session | None = None


async def probe_arm(arm: ArmEndpoint, say: Callable[[str], None]) -> None:
    """Ask the arm's server what it serves: model, context per slot, slots, tokenizer route."""
    probe = await arm.engine.probe()
    arm.model = str(probe.get("model") or arm.engine.model)
    arm.info = await server_info(arm.engine.http, arm.engine.server_root, arm.engine.name)
    say(f"{arm.role} '{arm.target}': {arm.info.describe()}")


async def prepare(
    client: httpx.AsyncClient,
    plan: SpeedPlan,
    arms: Sequence[ArmEndpoint],
    corpus: str,
    tasks: Sequence[str],
    session: Session | None,
    say: Callable[[str], None],
) -> Prepared:
    """Build the workloads on the probed arms' servers (the first one's tokenizer), capped to what all of them
    hold; the first request (a calibration) must succeed."""
    notes: list[str] = []
    infos = [a.info for a in arms if a.info is not None]
    ctxs = [i.n_ctx for i in infos if i.n_ctx]
    lengths, note = cap_lengths(plan.lengths, min(ctxs) if ctxs else None, plan.output_tokens)
    if note:
        notes.append(note)
    slots = [i.slots for i in infos if i.slots]
    levels = [c for c in sorted(set(plan.concurrency)) if not slots or c <= min(slots)]
    if len(levels) < len(set(plan.concurrency)):
        skipped = sorted(set(plan.concurrency) - set(levels))
        notes.append(
            f"concurrency {', '.join(map(str, skipped))} skipped: the servers have {min(slots)} slot(s), "
            f"so more concurrent requests would only queue"
        )
    sweep = max([n for n in lengths if n <= plan.sweep_length] or lengths[:1])
    base = arms[0]
    tokenizer = Tokenizer(client, base.engine.server_root, base.info.tokenizer if base.info else None, base.model)
    maker = PromptMaker(tokenizer, corpus)
    await maker.prepare()
    if maker.tokens is None:
        notes.append("the server has no tokenizer route: prompt lengths are estimated at 4 characters a token")
    text, content = await maker.window(64, 0)
    calib = await measure(
        client, _url(base), _body(base, text, plan, True), Measurement("warmup", "calibrate", 1, 0, 0)
    )
    if calib.error:
        from evalsuite.errors import EndpointError

        raise EndpointError(f"The {base.role} endpoint {_url(base)} failed the first speed request: {calib.error}")
    maker.calibrate(content, calib.prompt_tokens)
    say(f"chat template and instruction: {maker.overhead} tokens; input lengths {lengths}, concurrency {levels}")
    warmup = [(await maker.window(lengths[0], 13 * i + 1))[0] for i in range(plan.warmup)]
    steps = await plan_steps(plan, maker, lengths, levels, sweep, tasks[: plan.task_prompts], session)
    record = {
        **to_jsonable(plan),
        "lengths_run": lengths,
        "concurrency_run": levels,
        "sweep_length_run": sweep,
        "template_tokens": maker.overhead,
        "session": {"name": session.name, "source": session.source, "turns": len(session.turns)} if session else None,
    }
    return Prepared(steps, warmup, record, notes, session)


def server_record(arm: ArmEndpoint) -> dict[str, Any]:
    """What the report says about one arm's server."""
    return {
        "target": arm.target,
        "model": arm.model,
        "dialect": arm.engine.name,
        "base_url": arm.engine.base_url,
        **asdict(arm.info or ServerInfo(None, None, None)),
    }


async def measure_arms(
    client: httpx.AsyncClient,
    plan: SpeedPlan,
    arms: Sequence[ArmEndpoint],
    prepared: Prepared,
    say: Callable[[str], None] = lambda _m: None,
) -> list[Measurement]:
    """Warm each arm up, then run every step on every arm, the order alternating from step to step."""
    out: list[Measurement] = []
    for arm in arms:
        for i, text in enumerate(prepared.warmup):
            await measure(client, _url(arm), _body(arm, text, plan, True), Measurement("warmup", "warmup", 1, i, 0))
    history: History = {}
    steps = prepared.steps
    label = "/".join(a.role for a in arms)
    for i, step in enumerate(steps):
        order = list(arms) if i % 2 == 0 else list(reversed(arms))
        for arm in order:
            out.extend(await _step(client, arm, step, plan, prepared.session, history))
        if (i + 1) % max(len(steps) // 10, 1) == 0:
            say(f"speed ({label}): {i + 1}/{len(steps)} steps")
    return out


def speed_client(arm: ArmEndpoint) -> httpx.AsyncClient:
    """The client the speed run's requests go through (the engine's own is for its probes and counters)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(arm.engine.target.timeout_s, connect=10.0), limits=httpx.Limits(max_connections=32)
    )


async def run_speed(
    plan: SpeedPlan,
    arms: Sequence[ArmEndpoint],
    corpus: str,
    tasks: Sequence[str],
    say: Callable[[str], None] = lambda _m: None,
    session: Session | None = None,
) -> SpeedRecord:
    """Probe both servers, build the workloads, warm up, then run every step on both arms, interleaved."""
    for arm in arms:
        await probe_arm(arm, say)
    async with speed_client(arms[0]) as client:
        prepared = await prepare(client, plan, arms, corpus, tasks, session, say)
        record = SpeedRecord(prepared.plan, {a.role: server_record(a) for a in arms}, prepared.notes)
        if not all(a.engine.takes_ignore_eos for a in arms):
            record.notes.append(
                "an engine here takes no ignore_eos: outputs stop where the model stops, not at a fixed length"
            )
        record.measurements = await measure_arms(client, plan, arms, prepared, say)
    return record
