"""sample-test as library calls: draw both arms (resumable runs), load the draws, test, keep the evidence."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsuite.config import Config
from evalsuite.engines import make_engine, request_speculation
from evalsuite.errors import ConfigError, NotComparableError
from evalsuite.runner import RunOutcome, execute
from evalsuite.sampling.plan import TASK_SUFFIX, DrawSettings, SeededDraws, plan_draws
from evalsuite.sampling.tree import END, Draw, build_tree
from evalsuite.sampling.verdict import JudgeSettings, SamplingVerdict, judge
from evalsuite.serialize import to_jsonable
from evalsuite.speed import counter_deltas, drafting_seen
from evalsuite.store import RunManifest, RunStore, open_run
from evalsuite.tasks.data import DataChoice
from evalsuite.workflow import serving

Say = Callable[[str], None]
ProgressFactory = Callable[[str], Callable[[int, int], Any]]


@dataclass
class Arm:
    """One arm's stored draws: the run folders (one per task), the draws and the text of each token id."""

    target: str
    folders: list[Path]
    draws: list[Draw]
    pieces: dict[int, str] = field(default_factory=dict)
    manifests: list[RunManifest] = field(default_factory=list)
    drafted: int = 0  # draft tokens proposed over all draws, as the engine reported them (0: it gave none)
    accepted: int = 0
    counted: bool = False  # some of them came from the server's counters, not from each request

    @property
    def counted_by(self) -> str | None:
        """Who counted the drafting: each response, the server's counters around the sessions, or no one (None)."""
        if not self.drafted:
            return None
        return "server counters" if self.counted else "responses"

    def speculation(self) -> str | None:
        """A sentence on how much drafting the draws went through, when the engine reported it."""
        if not self.drafted:
            return None
        source = " (as the server counted them over the sessions that drew them)" if self.counted else ""
        return (
            f"{self.target} drafted {self.drafted} tokens over its draws and accepted {self.accepted} "
            f"({self.accepted / self.drafted:.0%}){source}."
        )


@dataclass
class SampleTest:
    """Both arms, the verdict and the context a report needs."""

    baseline: Arm
    candidate: Arm
    verdict: SamplingVerdict
    prompts: dict[str, str] = field(default_factory=dict)  # prompt id -> prompt text (shortened by the report)

    def piece(self, token: int) -> str:
        if token == END:
            return "<end>"
        if token == -3:
            return "<other>"
        return self.candidate.pieces.get(token, self.baseline.pieces.get(token, f"<{token}>"))

    def context(self, prefix: Sequence[int], last: int = 12) -> str:
        text = "".join(self.piece(t) for t in prefix[-last:])
        return ("…" if len(prefix) > last else "") + text

    def __json__(self) -> dict[str, Any]:
        """The verdict, both arms' runs, the candidate's drafted and accepted tokens, and each node's text."""
        out = to_jsonable(self.verdict)
        out["baseline"] = {"target": self.baseline.target, "runs": self.baseline.folders}
        out["candidate"] = {
            "target": self.candidate.target,
            "runs": self.candidate.folders,
            "drafted": self.candidate.drafted,
            "accepted": self.candidate.accepted,
            "acceptance": self.candidate.accepted / self.candidate.drafted if self.candidate.drafted else None,
            "drafting_counted_by": self.candidate.counted_by,
        }
        for node in out["nodes"]:
            node["context"] = self.context(node["prefix"])
            node["tokens"] = [self.piece(t) for t in node["outcomes"]]
        return out


def draw_arm(
    config: Config,
    target_name: str,
    tasks: Sequence[str],
    settings: DrawSettings,
    *,
    stream: int,
    data: DataChoice | None = None,
    data_path: str | None = None,
    say: Say = lambda _: None,
    progress: ProgressFactory | None = None,
) -> list[RunOutcome]:
    """Draw (or finish drawing) one arm on every task with one server start; returns one run per task."""
    target = config.target(target_name)
    outcomes = []
    # one rig thread: a draw is a handful of tokens from a tiny model, which one thread does in tens of
    # milliseconds, while ggml's spinning thread pool with two threads on a loaded two-core machine took
    # 140 times longer (68 ms against 9.6 s per 8-token draw, measured on the CI-sized machine under
    # load); both arms get the same thread count, and it is part of the run's fingerprint
    with serving(target, say, config.root, rig_threads=1) as server:
        for task in tasks:
            plan = plan_draws(config, target_name, task, settings, stream=stream, data=data, data_path=data_path)
            plan.served_by(server)
            label = f"{target_name}/{task} draws"
            engine = SeededDraws(make_engine(plan.target, base_url=plan.base_url))
            outcome = asyncio.run(
                execute(
                    plan,
                    # SeededDraws wraps an Engine and forwards everything but generate (duck-typed)
                    engine=engine,  # type: ignore[arg-type]
                    progress=progress(label) if progress else None,
                    on_warning=lambda w: say(f"warning: {w}"),
                )
            )
            say(f"{label}: {outcome.recorded} new, {outcome.skipped} already stored -> {outcome.folder}")
            outcomes.append(outcome)
    return outcomes


def load_arm(folders: Sequence[str | Path], *, draws: int | None = None, prompts: int | None = None) -> Arm:
    """Read the draws of stored draw runs (at most `draws` per prompt, the first `prompts` prompts of each)."""
    stores = [open_run(f) for f in folders]
    try:
        targets = {s.manifest.target for s in stores}
        arm = Arm(", ".join(sorted(targets)), [s.folder for s in stores], [], {}, [s.manifest for s in stores])
        for store in stores:
            _load_store(store, arm, draws, prompts)
        return arm
    finally:
        for s in stores:
            s.close()


def _load_store(store: RunStore, arm: Arm, draws: int | None, prompts: int | None) -> None:
    task = store.manifest.task
    if not task.endswith(TASK_SUFFIX):
        raise ConfigError(
            f"{store.folder} is not a draw run (its task is '{task}'); sample-test reads the runs "
            f"it stored under <target>/<task>{TASK_SUFFIX}/."
        )
    samples = store.samples()
    order: list[str] = []
    for sample in samples.values():
        pid = str(sample.metadata.get("prompt_id"))
        if pid not in order:
            order.append(pid)
    keep = set(order[:prompts] if prompts else order)
    drafted = accepted = 0
    for result in store.iter_results(strings="pieces"):
        meta = samples[result.sample_id].metadata
        pid, k = str(meta.get("prompt_id")), int(meta.get("draw", 0))
        if pid not in keep or (draws is not None and k >= draws):
            continue
        tokens = result.completion.tokens
        if tokens is None or not tokens.has_ids:
            if tokens is None or len(tokens) or result.completion.text:
                raise ConfigError(
                    f"{store.folder}: draw {result.sample_id} came back without token ids; sample-test "
                    "needs them (llama-server, vLLM with logprobs; a plain OpenAI endpoint may not "
                    "give ids)."
                )
        ids = tuple(int(i) for i in tokens.ids) if tokens is not None else ()
        for i, piece in zip(ids, tokens.pieces if tokens is not None else []):
            arm.pieces.setdefault(i, piece)
        ended = result.completion.finish_reason == "stop"
        spec = request_speculation(result.completion)
        if spec is not None:
            drafted += spec.drafted or 0
            accepted += spec.accepted or 0
        arm.draws.append(Draw(f"{task.removesuffix(TASK_SUFFIX)}/{pid}", int(meta.get("draw_seed", k)), ids, ended))
    # an engine that counts drafting on the server only (vLLM): its counters around each session
    counted = None if drafted else drafting_seen(counter_deltas(store.sessions()))
    if counted is not None:
        drafted, accepted = int(counted.draft_tokens), int(counted.accepted)
        arm.counted = True
    arm.drafted += drafted
    arm.accepted += accepted


_MUST_MATCH = ("task", "prompt_template", "dataset")


def check_comparable(baseline: Arm, candidate: Arm) -> None:
    """Both arms must have drawn the same prompts with the same settings; only the seed stream may differ."""

    def key(m: RunManifest) -> tuple[str, dict[str, Any]]:
        f = m.fields.as_mapping()
        params = {k: v for k, v in f.get("params", {}).items() if k != "seed"}
        return str(f.get("task")), {**{k: f.get(k) for k in _MUST_MATCH}, "params": params}

    base = dict(key(m) for m in baseline.manifests)
    cand = dict(key(m) for m in candidate.manifests)
    if set(base) != set(cand):
        raise NotComparableError(f"The arms drew different tasks: baseline {sorted(base)}, candidate {sorted(cand)}.")
    for task in base:
        diffs = [k for k in base[task] if base[task][k] != cand[task][k]]
        if diffs:
            raise NotComparableError(
                f"Task '{task}': the arms differ in {', '.join(diffs)} "
                f"(baseline {[base[task][k] for k in diffs]}, candidate "
                f"{[cand[task][k] for k in diffs]}); draw both with the same settings."
            )
    same = [m.fingerprint for m in baseline.manifests] == [m.fingerprint for m in candidate.manifests]
    if same:
        raise NotComparableError(
            "Both arms are the same stored runs (same target and seed stream): their draws are "
            "identical, which tests nothing. Draw the second arm with another seed."
        )


def judge_arms(
    baseline: Arm, candidate: Arm, settings: JudgeSettings, prompts: dict[str, str] | None = None
) -> SampleTest:
    """Check the arms are comparable, build both prefix trees and judge them."""
    check_comparable(baseline, candidate)
    verdict = judge(build_tree(baseline.draws), build_tree(candidate.draws), settings)
    speculation = candidate.speculation()
    if speculation:
        verdict.notes.append(speculation)
    elif any("spec" in " ".join(m.server_args or []) for m in candidate.manifests):
        verdict.notes.append(
            f"{candidate.target} is a speculative server but reported no drafted tokens: "
            "the draws may not have gone through speculation at all."
        )
    return SampleTest(baseline, candidate, verdict, prompts or {})


def prompt_texts(folders: Sequence[str | Path]) -> dict[str, str]:
    """Prompt id (as the tree names it, task/prompt) -> the prompt's text, from stored runs."""
    out: dict[str, str] = {}
    for folder in folders:
        store = open_run(folder)
        task = store.manifest.task.removesuffix(TASK_SUFFIX)
        for sample in store.samples().values():
            out.setdefault(f"{task}/{sample.metadata.get('prompt_id')}", sample.prompt_text)
        store.close()
    return out


def sample_test(
    config: Config,
    target_name: str,
    tasks: Sequence[str],
    settings: DrawSettings,
    judge_settings: JudgeSettings,
    *,
    baseline: str | None = None,
    data: DataChoice | None = None,
    data_path: str | None = None,
    say: Say = lambda _: None,
    progress: ProgressFactory | None = None,
) -> SampleTest:
    """Draw both arms (baseline from stream seed, target from seed + 1), then test them."""
    target = config.target(target_name)
    base_name = baseline or target.baseline
    if base_name is None:
        where = config.path or "the config"
        raise ConfigError(
            f"Target '{target_name}' has no baseline; set targets.{target_name}.baseline in {where} "
            "or pass --baseline NAME (the baseline itself, to test it against its own draws)."
        )
    config.target(base_name)
    arms = {}
    for role, name, stream in (("baseline", base_name, settings.seed), ("candidate", target_name, settings.seed + 1)):
        outcomes = draw_arm(
            config,
            name,
            tasks,
            settings,
            stream=stream,
            data=data,
            data_path=data_path,
            say=say,
            progress=progress,
        )
        arms[role] = [o.folder for o in outcomes]
    base = load_arm(arms["baseline"], draws=settings.draws, prompts=settings.prompts)
    cand = load_arm(arms["candidate"], draws=settings.draws, prompts=settings.prompts)
    return judge_arms(base, cand, judge_settings, prompt_texts(arms["baseline"]))
