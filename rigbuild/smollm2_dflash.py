"""A DFlash drafter for SmolLM2-135M-Instruct, trained on prompts the evaluated tasks never contain.

The data are SmolLM2's own greedy answers to two kinds of prompts: GSM8K
*train* questions (never in GSM8K test, MATH-500 or LiveCodeBench), each
asked twice, with the gsm8k prompt and with the math500 prompt (the question
as the problem); and competition-style problems written from templates
(`math_problems`), asked with the math500 prompt, so the drafter also sees
how SmolLM2 answers in LaTeX.  Prompts are built by the suite's own task
templates and tokenized by llama-server, exactly as `eval` sends them; the
answers and the target features come from one batched torch pass over the
GGUF's weights (`llama_torch`).  Generation is stored in chunks, so an
interrupted build resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalsuite.rig.errors import RigError
from evalsuite.rig.smollm2 import SMOLLM2_DFLASH_DRAFTS
from evalsuite.tasks.packaged import packaged_fixtures
from rigbuild.dflash_graph import Acceptance, DrafterShape, block_logits, require_torch, simulate_acceptance
from rigbuild.dflash_train import init_drafter

TARGET_LAYERS = (1, 8, 15, 22, 29)
"""Inputs of five SmolLM2 blocks, evenly spread from the first to the last (DFlash's recipe)."""
MAX_TOKENS = 256
"""The SmolLM2 targets' cap in evalsuite.toml: drafts past it are never verified."""
PROMPT_TASKS = ("gsm8k", "math500")
EOG_IDS = frozenset({0, 2})  # <|endoftext|>, <|im_end|>
MASK_TOKEN, MASK_ID = "<|im_start|>", 1
"""Opens every turn of a prompt and never appears inside an answer, so it is never an anchor."""


def train_questions(path: Path, start: int, count: int) -> list[dict[str, Any]]:
    """GSM8K train rows `start .. start + count` (file order), as rows both prompt templates can render."""
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][start : start + count]
    return [
        dict(row, problem=row["question"], unique_id=f"gsm8k-train-{start + i}", subject="train", level=0)
        for i, row in enumerate(rows)
    ]


def prompt_messages(
    rows: Sequence[dict[str, Any]], tasks: Sequence[str] = PROMPT_TASKS, source: str = "gsm8k train"
) -> list[list[dict[str, str]]]:
    """Each row's chat messages under every prompt template of `tasks`, rows first."""
    from evalsuite.tasks.build import build_samples
    from evalsuite.tasks.packaged import packaged_tasks
    from evalsuite.tasks.spec import load_task_spec

    per_task = [
        build_samples(load_task_spec(packaged_tasks() / f"{task}.yaml"), list(rows), source=source) for task in tasks
    ]
    return [list(samples[i].messages) for i in range(len(rows)) for samples in per_task]


def tokenize(base_url: str, messages: Sequence[list[dict[str, str]]]) -> list[list[int]]:
    """Prompt ids as llama-server's chat endpoint builds them (its template, special tokens parsed)."""
    import httpx

    out = []
    with httpx.Client(base_url=base_url, timeout=120.0) as client:
        for msgs in messages:
            prompt = client.post("/apply-template", json={"messages": msgs}).json()["prompt"]
            reply = client.post("/tokenize", json={"content": prompt, "add_special": True, "parse_special": True})
            out.append(list(reply.json()["tokens"]))
    return out


def generate_chunks(
    target_path: Path,
    prompts: Sequence[list[int]],
    out_dir: Path,
    chunk: int = 256,
    slots: int = 64,
    progress: Callable[[str], None] = print,
    poll_s: float = 30.0,
    answers: Path | None = None,
) -> list[Path]:
    """Greedy answers and features for `prompts`, one file per `chunk` of them (kept between runs).

    Several processes may fill the same `out_dir` at once (one torch thread each keeps a core busy):
    each claims a chunk before generating it, so none is made twice, and every process returns once
    all chunks exist.  A claim left by a process that died is taken over.

    With `answers`, a folder of answers (`save_answers`), a chunk whose answers are there gets its
    features recomputed from them instead of decoding again, and a chunk decoded or found without
    its answers there has them written: the hours of decoding are kept where the cache is not.
    """
    torch = require_torch()
    from rigbuild import llama_torch

    out_dir.mkdir(parents=True, exist_ok=True)
    target: llama_torch.LlamaTarget | None = None
    paths = [
        out_dir / f"chunk-{first:06d}-{min(first + chunk, len(prompts)):06d}.pt"
        for first in range(0, len(prompts), chunk)
    ]
    while True:
        waiting = []
        for index, path in enumerate(paths):
            kept = answers / f"{path.stem}.npz" if answers is not None else None
            if path.is_file():
                if kept is not None and not kept.is_file():
                    save_answers(kept, [(tokens, start) for tokens, start, _ in torch.load(path)])
                continue
            if not _claim(path):
                waiting.append(path)
                continue
            first, last = index * chunk, min((index + 1) * chunk, len(prompts))
            if target is None:
                target = llama_torch.LlamaTarget(target_path)
            if kept is not None and kept.is_file():
                progress(f"  features of the kept answers to prompts {first}..{last - 1} of {len(prompts)}")
                seqs = target.features(_matching(load_answers(kept), prompts[first:last], kept), TARGET_LAYERS)
            else:
                progress(f"  generating answers to prompts {first}..{last - 1} of {len(prompts)}")
                seqs = target.greedy(prompts[first:last], TARGET_LAYERS, MAX_TOKENS, EOG_IDS, slots, progress)
                if kept is not None:
                    save_answers(kept, [(s.tokens, s.start) for s in seqs])
            partial = path.with_suffix(".partial")
            torch.save([(s.tokens, s.start, s.features) for s in seqs], partial)
            partial.replace(path)
            path.with_suffix(".claim").unlink(missing_ok=True)
        if not waiting:
            return paths
        progress(f"  waiting for {len(waiting)} chunks another process is generating")
        time.sleep(poll_s)


def save_answers(path: Path, sequences: Sequence[tuple[Sequence[int], int]]) -> None:
    """(tokens, start) sequences, prompt and answer ids, compressed: about 0.15 KB an answer."""
    lengths = np.array([len(tokens) for tokens, _ in sequences], dtype=np.int32)
    flat = np.concatenate([np.asarray(tokens, dtype=np.int64) for tokens, _ in sequences])
    if flat.size and (flat.min() < 0 or flat.max() > np.iinfo(np.uint32).max):
        raise ValueError(f"token ids outside 0..2**32-1 in the answers for {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(path.name + ".partial")
    with staged.open("wb") as fh:
        np.savez_compressed(
            fh,
            tokens=flat.astype(np.uint32),
            lengths=lengths,
            starts=np.array([start for _, start in sequences], dtype=np.int32),
        )
    staged.replace(path)


def load_answers(path: Path) -> list[tuple[list[int], int]]:
    """`save_answers` read back."""
    with np.load(path) as data:
        tokens, lengths, starts = data["tokens"], data["lengths"], data["starts"]
    if len(lengths) != len(starts) or int(lengths.sum()) != len(tokens) or (starts >= lengths).any():
        raise RigError(f"{path} is not a file of answers: its lengths do not add up; delete it to decode again.")
    ends = np.cumsum(lengths)
    return [
        (tokens[end - n : end].tolist(), int(start)) for end, n, start in zip(ends.tolist(), lengths.tolist(), starts)
    ]


def _matching(
    kept: list[tuple[list[int], int]], prompts: Sequence[list[int]], path: Path
) -> list[tuple[list[int], int]]:
    """`kept` when it answers exactly `prompts`, in order; otherwise an error that names the file."""
    if len(kept) != len(prompts) or any(tokens[:start] != list(p) for (tokens, start), p in zip(kept, prompts)):
        raise RigError(
            f"The answers in {path} were made for other prompt ids than these (another tokenizer?); "
            "delete the file to decode them again."
        )
    return kept


def _claim(path: Path) -> bool:
    """Whether this process may generate `path`: no other live process has claimed it.

    Two processes taking over the same dead claim at once may both generate the chunk; each
    writes the same file whole, so that costs time, never data.
    """
    claim = path.with_suffix(".claim")
    for _ in range(2):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                owner = int(claim.read_text() or 0)
            except (OSError, ValueError):
                return False  # its owner is writing it this instant
            if owner and _alive(owner):
                return False
            claim.unlink(missing_ok=True)  # its owner died: take it over
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        return True
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class SmolDFlashConfig:
    """The drafter's size and its optimisation; the committed checksum depends on them."""

    n_layer: int = 2
    n_head: int = 9
    n_ff: int = 1536
    n_draft: int = SMOLLM2_DFLASH_DRAFTS
    epochs: int = 6
    anchors: int = 48
    """Anchors sampled per sequence and step (DFlash trains on random anchors, not every position)."""
    negatives: int = 4096
    """Tokens absent from the data scored per step (a fresh sample each time)."""
    lr: float = 2e-3
    warmup: float = 0.05
    """Share of the steps over which the learning rate ramps up."""
    decay: float = 4.0
    """Position k of a block weighs exp(-(k-1)/decay) in the loss: early drafts decide acceptance."""
    held_out: int = 20
    """Every `held_out`-th question (both its prompts) is kept out of training to judge the drafter."""
    seed: int = 0
    threads: int = 1
    """Torch threads generating the data: one, as the committed drafter's data were made (greedy
    tokens at near-ties can depend on how a sum is split between threads)."""
    train_threads: int = 2
    """Torch threads training: the head's products dominate, and two threads take about half the time."""
    second_epochs: int = 1
    """Epochs of the second stage, over every prompt set (MATH train added) from the first's best weights
    (one: MATH-500's acceptance rose from 30.7 % to 40.4 %); 0: no second stage, and the MATH train
    prompts are neither decoded nor read."""
    second_lr: float = 1e-3
    """The second stage's peak learning rate, with its own warm-up and decay and a fresh optimiser."""


@dataclass
class Sequences:
    """Greedy target sequences with their features (float16), as `generate_chunks` stores them."""

    tokens: list[list[int]]
    starts: list[int]
    features: list[Any]

    @classmethod
    def load(cls, paths: Sequence[Path]) -> Sequences:
        torch = require_torch()
        out = cls([], [], [])
        for path in paths:
            for tokens, start, feats in torch.load(path):
                out.tokens.append(tokens)
                out.starts.append(start)
                out.features.append(feats)
        return out

    def __add__(self, other: Sequences) -> Sequences:
        return Sequences(self.tokens + other.tokens, self.starts + other.starts, self.features + other.features)

    def split(self, every: int) -> tuple[Sequences, Sequences]:
        """(train, held out): prompts 2q and 2q + 1 are held out together when q % every == every - 1.

        Those are one GSM8K question's two prompts, or two written problems.
        """
        parts: tuple[Sequences, Sequences] = (Sequences([], [], []), Sequences([], [], []))
        for i, (t, s, f) in enumerate(zip(self.tokens, self.starts, self.features)):
            part = parts[int((i // len(PROMPT_TASKS)) % every == every - 1)]
            part.tokens.append(t)
            part.starts.append(s)
            part.features.append(f)
        return parts


def replay(params: dict[str, Any], dshape: Any, data: Sequences, embd: Any) -> Acceptance:
    """llama-server's greedy draft/verify loop over `data`, drafting with the full vocabulary."""
    return Acceptance.total(
        simulate_acceptance(params, dshape, f.float(), t, s, MASK_ID, embd, embd, None, EOG_IDS)
        for t, s, f in zip(data.tokens, data.starts, data.features)
    )


def train_smol_drafter(
    train: Sequences,
    held: Sequences,
    embd_array: Any,
    output_norm: Any,
    config: SmolDFlashConfig = SmolDFlashConfig(),
    progress: Callable[[str], None] = print,
    checkpoint: Path | None = None,
    more: tuple[Sequences, Sequences] | None = None,
) -> tuple[dict[str, Any], Acceptance]:
    """Fit the drafter on `train`; return its float32 tensors and its replayed acceptance on `held`.

    With `more` (train, held), a second stage of `config.second_epochs` goes on from the first
    stage's best weights over both sets together, judged on both held-out sets: data added to a
    trained drafter cost its epochs, not a training from scratch.

    With `checkpoint`, the whole training state is saved there after every epoch (the second stage's
    beside it, `-second` added to its name) and a run that finds one for the same configuration and
    data goes on from it: an interrupted training (hours of CPU) loses at most one epoch and ends
    with the weights an uninterrupted one writes.

    The head during training scores the tokens the data contain and a fresh
    random sample of the others (their logits weighted up to stand for all of
    them, as in sampled softmax): far cheaper than the whole vocabulary, while
    every token the server may draft is pushed down now and then.  The replay
    drafts over the whole vocabulary, as the server does.
    """
    torch = require_torch()
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.train_threads)
    embd = torch.from_numpy(np.ascontiguousarray(embd_array, dtype=np.float32))
    fit = _Fit(train, held, embd, config, progress)
    gen = torch.Generator().manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    params = init_drafter(fit.shape, int(train.features[0].shape[1]), gen)
    with torch.no_grad():  # start from the scale the shared head was trained for
        params["output_norm.weight"].copy_(torch.from_numpy(np.array(output_norm, dtype=np.float32)))
    first_key = {k: v for k, v in asdict(config).items() if not k.startswith("second_")}
    best = fit.stage(params, 1, config.epochs, config.lr, rng, gen, first_key, checkpoint)
    if more is not None and config.second_epochs:
        both = _Fit(train + more[0], held + more[1], embd, config, progress)
        progress(f"  second stage: {len(both.train.tokens)} sequences, {len(both.held.tokens)} held out")
        params = {k: v.clone().requires_grad_(True) for k, v in best[0].items()}
        gen = torch.Generator().manual_seed(config.seed + 1)
        rng = np.random.default_rng(config.seed + 1)
        last = config.epochs + config.second_epochs
        second = checkpoint.with_name(f"{checkpoint.stem}-second{checkpoint.suffix}") if checkpoint else None
        best = both.stage(params, config.epochs + 1, last, config.second_lr, rng, gen, asdict(config), second)
    return {k: v.numpy().astype(np.float32) for k, v in best[0].items()}, best[1]


class _Fit:
    """The training loop over one set of sequences, run once per stage."""

    def __init__(
        self, train: Sequences, held: Sequences, embd: Any, config: SmolDFlashConfig, progress: Callable[[str], None]
    ):
        torch = require_torch()
        self.train, self.held, self.embd, self.config, self.progress = train, held, embd, config, progress
        self.used = torch.tensor(sorted({t for seq in train.tokens for t in seq} | {MASK_ID}))
        self.local = torch.full((embd.shape[0],), -100, dtype=torch.long)
        self.local[self.used] = torch.arange(len(self.used))
        self.unused = torch.nonzero(self.local < 0).flatten()
        self.n_neg = min(config.negatives, len(self.unused))
        self.neg_weight = math.log(len(self.unused) / max(self.n_neg, 1))
        self.shape = DrafterShape(
            n_embd=embd.shape[1],
            n_layer=config.n_layer,
            n_head=config.n_head,
            n_ff=config.n_ff,
            n_draft=config.n_draft,
            target_layers=TARGET_LAYERS,
        )

    def stage(
        self,
        params: dict[str, Any],
        first: int,
        last: int,
        peak_lr: float,
        rng: np.random.Generator,
        gen: Any,
        config_key: dict[str, Any],
        checkpoint: Path | None,
    ) -> tuple[dict[str, Any], Acceptance]:
        """Epochs `first..last` with a fresh optimiser; the best epoch's weights (held-out acceptance) and result."""
        torch = require_torch()
        config, train = self.config, self.train
        optim = torch.optim.Adam(params.values(), lr=peak_lr)
        weights = torch.exp(-torch.arange(config.n_draft, dtype=torch.float32) / config.decay)
        total_steps, step = (last - first + 1) * len(train.tokens), 0
        best: tuple[dict[str, Any], Acceptance] | None = None
        key = {"config": config_key, "sequences": len(train.tokens), "held_out": len(self.held.tokens)}
        saved = _load_checkpoint(checkpoint, key)
        if saved is not None:
            _restore(saved, params, optim, rng, gen)
            best, step, first = saved["best"], saved["step"], saved["epoch"] + 1
            self.progress(f"  resuming after epoch {saved['epoch']} from {checkpoint}")
        for epoch in range(first, last + 1):
            losses = []
            for i in rng.permutation(len(train.tokens)):
                step += 1
                frac = step / total_steps
                lr = peak_lr * min(1.0, frac / config.warmup) * (0.55 + 0.45 * math.cos(math.pi * frac))
                for group in optim.param_groups:
                    group["lr"] = lr
                loss = self._loss(params, int(i), weights, rng, gen)
                optim.zero_grad()
                loss.backward()
                optim.step()
                losses.append(float(loss.detach()))
            result = replay(params, self.shape, self.held, self.embd)
            self.progress(
                f"  epoch {epoch}: loss {np.mean(losses):.3f}, held-out replayed acceptance {result.rate:.1%}, "
                f"tokens per verification {result.tau:.2f}"
            )
            if best is None or result.rate > best[1].rate:
                best = ({k: p.detach().clone() for k, p in params.items()}, result)
            if checkpoint is not None:
                _save_checkpoint(
                    checkpoint, {"key": key, "epoch": epoch, "step": step, "best": best}, params, optim, rng, gen
                )
        assert best is not None
        return best

    def _loss(self, params: dict[str, Any], i: int, weights: Any, rng: np.random.Generator, gen: Any) -> Any:
        """The weighted loss of sequence `i` over anchors drawn at random, each drafting one block."""
        torch = require_torch()
        train, local, used, unused, dshape = self.train, self.local, self.used, self.unused, self.shape
        ids = torch.tensor(train.tokens[i])
        all_anchors = np.arange(train.starts[i], len(ids) - 1)
        pick = rng.choice(all_anchors, size=min(self.config.anchors, len(all_anchors)), replace=False)
        anchors = torch.from_numpy(np.sort(pick))
        block = torch.full((len(anchors), dshape.block_size), MASK_ID)
        block[:, 0] = ids[anchors]
        where = anchors[:, None] + torch.arange(1, dshape.block_size)[None, :]
        target = torch.full(where.shape, -100)
        ok = where < len(ids)
        target[ok] = local[ids[where[ok]]]
        rows = torch.cat([used, unused[torch.randint(len(unused), (self.n_neg,), generator=gen)]])
        embd = self.embd
        logits = block_logits(params, dshape, train.features[i].float(), block, anchors, embd, embd[rows])[:, 1:]
        logits = torch.cat([logits[..., : len(used)], logits[..., len(used) :] + self.neg_weight], dim=-1)
        nll = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none"
        ).view(target.shape)
        w = weights[None, :] * (target >= 0)
        return (nll * w).sum() / w.sum()


def _snapshot(params: dict[str, Any], optim: Any, rng: np.random.Generator, gen: Any) -> dict[str, Any]:
    """What the next epoch depends on besides the epoch count: weights, Adam's moments, every RNG."""
    torch = require_torch()
    return {
        "params": {k: p.detach() for k, p in params.items()},  # torch.save copies them out at once
        "optim": optim.state_dict(),
        "numpy_rng": rng.bit_generator.state,
        "torch_gen": gen.get_state(),
        "torch_rng": torch.get_rng_state(),
    }


def _restore(state: dict[str, Any], params: dict[str, Any], optim: Any, rng: np.random.Generator, gen: Any) -> None:
    """`_snapshot` undone, in place."""
    torch = require_torch()
    with torch.no_grad():
        for name, value in state["params"].items():
            params[name].copy_(value)
    optim.load_state_dict(state["optim"])
    rng.bit_generator.state = state["numpy_rng"]
    gen.set_state(state["torch_gen"])
    torch.set_rng_state(state["torch_rng"])


def _save_checkpoint(
    path: Path, progress: dict[str, Any], params: dict[str, Any], optim: Any, rng: np.random.Generator, gen: Any
) -> None:
    """The training state after an epoch (`progress`: key, epoch, step, best), replacing the last one whole."""
    torch = require_torch()
    staged = path.with_name(path.name + ".partial")
    torch.save({**progress, **_snapshot(params, optim, rng, gen)}, staged)
    staged.replace(path)


def _load_checkpoint(path: Path | None, key: dict[str, Any]) -> dict[str, Any] | None:
    """The training state saved at `path` for this configuration and data; None when there is none."""
    if path is None or not path.is_file():
        return None
    torch = require_torch()
    state: dict[str, Any] = torch.load(path, weights_only=False)
    return state if state.get("key") == key else None


def write_smol_drafter(
    out: Path, arrays: dict[str, np.ndarray], config: SmolDFlashConfig, target: Path, n_vocab: int
) -> None:
    """The drafter as `src/models/dflash.cpp` loads it: f16 matrices, SmolLM2's tokenizer, no embeddings or head."""
    from evalsuite.rig.gguf_file import Shape, Tensors, write_gguf

    tensors = Tensors()
    for name, array in arrays.items():
        tensors.add(name, array, "F16" if array.ndim == 2 else "F32")
    shape = Shape(
        n_vocab=n_vocab,
        n_embd=arrays["fc.weight"].shape[0],
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_head_kv=config.n_head,
        n_ff=config.n_ff,
        n_ctx=8192,
    )
    write_gguf(
        out,
        arch="dflash",
        name="smollm2-135m-instruct-dflash",
        shape=shape,
        tensors=tensors,
        vocab=target,
        extra={
            "dflash.block_size": config.n_draft + 1,
            "dflash.target_layers": [int(x) for x in TARGET_LAYERS],
            "tokenizer.ggml.mask_token_id": MASK_ID,
        },
    )


GSM8K_TRAIN_QUESTIONS = 768
"""Questions used (file order), 1,536 prompts: what they cost and give is in docs/rig.md."""
WRITTEN_PROBLEMS = 2048
"""Template-written problems (`math_problems`, seed 0), one math500 prompt each."""
MATH_TRAIN = packaged_fixtures() / "math_train" / "problems.jsonl"
"""1,024 problems of MATH's train split (fixtures/math_train/SOURCE.md), one math500 prompt each; in the
repository, not in the package, like the answers."""


def training_messages(gsm8k_train: Path, questions: int, written: int) -> list[list[dict[str, str]]]:
    """The GSM8K train questions' prompts, then the written problems' (none of them a MATH-500 fixture problem)."""
    from evalsuite.tasks.data import read_jsonl
    from rigbuild.math_problems import math_problems

    fixture = frozenset(str(row["problem"]) for row in read_jsonl(packaged_fixtures() / "math500.jsonl"))
    rows = math_problems(written, seed=0, exclude=fixture)
    return prompt_messages(train_questions(gsm8k_train, 0, questions)) + prompt_messages(
        rows, ("math500",), "written problems"
    )


def math_train_messages(path: Path) -> list[list[dict[str, str]]]:
    """The MATH train problems' prompts (the math500 prompt), none of them a MATH-500 problem."""
    from evalsuite.tasks.data import read_jsonl

    rows = [dict(row, unique_id=f"math-train-{i}") for i, row in enumerate(read_jsonl(path))]
    return prompt_messages(rows, ("math500",), "math train")


def _prompt_ids(
    work: Path, messages: list[list[dict[str, str]]], assets: Any, progress: Callable[[str], None]
) -> tuple[str, list[list[int]]]:
    """(digest of `messages`, their prompt ids), tokenized by llama-server once and kept in `work`."""
    from evalsuite.rig.launcher import serve_with_assets

    digest = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:12]
    prompts_file = work / f"prompts-{digest}.json"
    if not prompts_file.is_file():
        progress(f"Tokenizing {len(messages)} prompts with llama-server.")
        with serve_with_assets(["smollm2-baseline"], assets, threads=1) as servers:
            ids = tokenize(servers["smollm2-baseline"].base_url, messages)
        work.mkdir(parents=True, exist_ok=True)
        staged = prompts_file.with_suffix(".partial")
        staged.write_text(json.dumps(ids))
        staged.replace(prompts_file)
    return digest, json.loads(prompts_file.read_text())


def train_smollm2_dflash(
    out: Path,
    work: Path,
    gsm8k_train: Path,
    questions: int = GSM8K_TRAIN_QUESTIONS,
    written: int = WRITTEN_PROBLEMS,
    config: SmolDFlashConfig = SmolDFlashConfig(),
    progress: Callable[[str], None] = print,
    data_only: bool = False,
    answers: Path | None = None,
    math_train: Path = MATH_TRAIN,
) -> Acceptance | None:
    """Generate the data into `work` (resumable), train, and write the drafter to `out`.

    The data come in prompt sets (GSM8K train with the written problems; MATH train), each
    generated and kept under a digest of its own prompts, so adding a set leaves the others' data valid.
    With `answers`, the decoded answers are kept there too, in a folder per prompt set, and read back
    by a later build that lacks the cache (`generate_chunks`).

    Returns the replayed acceptance on the held-out questions; None with `data_only`, which stops
    once the data exist (more processes started so share the generation: `generate_chunks`).
    """
    torch = require_torch()
    from evalsuite.rig.assets import ensure_assets
    from evalsuite.rig.gguf_file import read_model

    torch.set_num_threads(config.threads)
    assets = ensure_assets(progress, include_learned=False, include_smollm2=True)
    target = assets.models["smollm2"]
    prompt_sets = [training_messages(gsm8k_train, questions, written)]
    if config.second_epochs:
        prompt_sets.append(math_train_messages(math_train))
    sets = []
    for messages in prompt_sets:
        digest, prompts = _prompt_ids(work, messages, assets, progress)
        progress(f"Generating SmolLM2's greedy answers to {len(prompts)} prompts (resumable, in {work}).")
        chunks = generate_chunks(
            target, prompts, work / f"chunks-{digest}", progress=progress, answers=answers / digest if answers else None
        )
        sets.append(chunks)
    if data_only:
        return None
    loaded = [Sequences.load(chunks).split(config.held_out) for chunks in sets]
    for name, (t, h) in zip(("first stage", "second stage adds"), loaded):
        n_tokens = sum(len(x) - s for x, s in zip(t.tokens, t.starts))
        progress(
            f"{name.capitalize()}: {len(t.tokens)} sequences ({n_tokens} generated tokens); {len(h.tokens)} held out."
        )
    (train, held), more = loaded[0], (loaded[1] if len(loaded) > 1 else None)
    _, shape, arrays = read_model(target)
    weights, acceptance = train_smol_drafter(
        train,
        held,
        arrays["token_embd.weight"],
        arrays["output_norm.weight"],
        config,
        progress,
        work / "training.pt",
        more,
    )
    write_smol_drafter(out, weights, config, target, shape.n_vocab)
    return acceptance
