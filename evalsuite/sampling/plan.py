"""The draw plan: many short seeded continuations per prompt, stored like any run.

Each draw is one stored sample, id `<prompt id>#<k>`, with its own seed
derived from (arm stream, prompt id, k).  The baseline arm draws from stream
`seed`, the candidate arm from `seed + 1`, so the two arms' random numbers
are independent even when both arms are the same server (the determinism
check: the baseline against itself).  The sampling settings and the stream
go into the run parameters, hence into the fingerprint; the draw count does
not, so asking for more draws later extends the same run and re-running after
an interruption asks only for the missing draws.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from typing import Any

from evalsuite.config import Config
from evalsuite.engines import Engine
from evalsuite.errors import ConfigError
from evalsuite.records import Completion, GenerationParams, Sample
from evalsuite.runner import RunPlan, plan_run
from evalsuite.tasks.data import DataChoice

TASK_SUFFIX = "@sampling"
"""Draw runs live under runs/<target>/<task>@sampling/, apart from the greedy runs of the task."""
SEED_SCHEME = "sha256(stream/prompt/k) mod 2^31-1"


@dataclass(frozen=True)
class DrawSettings:
    """How to sample: the same for both arms (temperature > 0; top-p, top-k as the server applies them).

    The defaults keep the tree narrow (temperature 0.7, top-k 8): the test's
    power is per node, and draws that share prefixes reach deeper nodes often
    enough to test them.  Losslessness is promised for every setting, so run
    your deployment's own settings as well.
    """

    draws: int = 256
    prompts: int = 2
    max_tokens: int = 8
    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int | None = 8
    seed: int = 42

    def __post_init__(self) -> None:
        checks = [
            (self.draws >= 2, f"--draws must be at least 2, got {self.draws}"),
            (self.prompts >= 1, f"--prompts must be at least 1, got {self.prompts}"),
            (1 <= self.max_tokens <= 512, f"--tokens must be between 1 and 512, got {self.max_tokens}"),
            (
                math.isfinite(self.temperature) and self.temperature > 0,
                f"--temperature must be above 0 (greedy decoding never exercises sampling), got {self.temperature}",
            ),
            (0 < self.top_p <= 1, f"--top-p must be in (0, 1], got {self.top_p}"),
            (
                self.top_k is None or self.top_k != 1,
                "--top-k 1 is greedy decoding; use 0 (no limit) or a value above 1",
            ),
            (self.top_k is None or self.top_k >= 0, f"--top-k must be 0 (no limit) or above 1, got {self.top_k}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message + ".")


DEFAULT_TASKS = ("gsm8k",)
_KEYS = {"draws": "draws", "prompts": "prompts", "tokens": "max_tokens", "temperature": "temperature"}
_KEYS |= {"top_p": "top_p", "top_k": "top_k"}


@dataclass(frozen=True)
class ResolvedSettings:
    """The draw settings and tasks a sample-test uses, and which config table supplied them (None: built-in)."""

    settings: DrawSettings
    tasks: list[str]
    source: str | None
    flags: tuple[str, ...] = ()  # the keys a flag set


def resolve_settings(
    config: Config, target_name: str, baseline_name: str | None, flags: dict[str, Any]
) -> ResolvedSettings:
    """Each key from the flags, else `[targets.TARGET.sampling]`, else the baseline's table, else built-in.

    The baseline's table says where its model branches (tasks, temperature);
    a candidate's table adds what its speculative method needs (an n-gram
    drafter needs longer draws before its lookups hit).  `flags` maps the
    table's keys (tasks, prompts, draws, tokens, temperature, top_p, top_k,
    seed) to a value or None (not given).
    """
    tables = []
    for name in dict.fromkeys(n for n in (target_name, baseline_name) if n is not None):
        table = config.target(name).sampling
        if table is not None:
            tables.append((f"targets.{name}.sampling", table))
    used: list[str] = []

    def pick(key: str) -> Any:
        if flags.get(key) is not None:
            return flags[key]
        for source, table in tables:
            if getattr(table, key) is not None:
                used.append(source)
                return getattr(table, key)
        return None

    values = {field: value for key, field in _KEYS.items() if (value := pick(key)) is not None}
    if flags.get("seed") is not None:
        values["seed"] = flags["seed"]
    tasks = pick("tasks") or list(DEFAULT_TASKS)
    sources = [source for source, _ in tables if source in used]
    given = tuple(k for k in (*_KEYS, "tasks", "seed") if flags.get(k) is not None)
    return ResolvedSettings(DrawSettings(**values), list(tasks), " + ".join(sources) or None, given)


def draw_seed(stream: int, prompt_id: str, k: int) -> int:
    """The seed of draw k of a prompt in an arm's stream (fits llama.cpp's uint32 seed, never its -1)."""
    digest = hashlib.sha256(f"{stream}/{prompt_id}/{k}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**31 - 1)


def draw_samples(prompts: list[Sample], draws: int, stream: int) -> list[Sample]:
    """`draws` copies of every prompt, each carrying its prompt id, index and seed in its metadata."""
    return [
        replace(
            p,
            id=f"{p.id}#{k}",
            metadata={**p.metadata, "prompt_id": p.id, "draw": k, "draw_seed": draw_seed(stream, p.id, k)},
        )
        for p in prompts
        for k in range(draws)
    ]


def draw_params(base: GenerationParams, settings: DrawSettings, stream: int) -> GenerationParams:
    """The task's generation parameters with the sampling settings; one top logprob (it carries the token ids)."""
    return replace(
        base,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        seed=stream,
        n=1,
        top_logprobs=1,
    )


def plan_draws(
    config: Config,
    target_name: str,
    task_name: str,
    settings: DrawSettings,
    *,
    stream: int,
    data: DataChoice | None = None,
    data_path: str | None = None,
) -> RunPlan:
    """A RunPlan whose samples are the draws of the first `settings.prompts` prompts of the task."""
    plan = plan_run(config, target_name, task_name, data=data, data_path=data_path, limit=settings.prompts)
    if len(plan.samples) < settings.prompts:
        raise ConfigError(
            f"Task '{task_name}' has {len(plan.samples)} prompts in this dataset; --prompts asked "
            f"for {settings.prompts}."
        )
    plan.task = plan.task.model_copy(update={"name": task_name + TASK_SUFFIX})
    plan.params = draw_params(plan.params, settings, stream)
    plan.samples = draw_samples(plan.samples, settings.draws, stream)
    return plan


class SeededDraws:
    """An engine that sends each draw with its own seed; everything else goes to the wrapped engine."""

    def __init__(self, inner: Engine):
        self.inner = inner

    async def generate(self, sample: Sample, params: GenerationParams) -> Completion:
        seed = sample.metadata.get("draw_seed")
        if not isinstance(seed, int):
            raise ConfigError(f"Sample {sample.id} is not a draw (no draw_seed in its metadata).")
        return await self.inner.generate(sample, replace(params, seed=seed))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
