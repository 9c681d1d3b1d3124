"""The rig's trained model: it has learned half of the fixture problems.

For the half of each task's fixture problems with the shortest reference
solutions (MATH-500 and GSM8K; ties in file order) it was trained on that
worked solution, which ends in the task's final-answer
format (`\\boxed{...}` / `#### N`); for the rest on a short, well-formatted
answer with a wrong final value.  So its accuracy on the fixture is known
(~50 %), neither 0 nor 100 %, and every answer stops with `<|end|>`.

Training needs torch (CPU) and a running rig server, whose `/apply-template`
and `/tokenize` give exactly the tokens llama-server will see.  The file is
committed with its sha256; a rebuild reports whether it reproduced it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from evalsuite.records import Sample
from evalsuite.rig.committed import sha256_of
from evalsuite.rig.errors import RigError

END_OF_TURN = "<|end|>"
TASKS = ("math500", "gsm8k")


@dataclass(frozen=True)
class LearnedItem:
    """A fixture sample, the exact text the model learned to answer it with, and whether that is right."""

    sample: Sample
    answer: str
    correct: bool


def _first_sentence(text: str, fallback: str) -> str:
    """The solution's opening sentence when it is short and its math delimiters are balanced."""
    match = re.match(r"(.{10,200}?[.!?])(\s|$)", text, flags=re.S)
    if match is None:
        return fallback
    sentence = match.group(1).strip()
    balanced = sentence.count("$") % 2 == 0 and sentence.count("{") == sentence.count("}")
    return sentence if balanced and "\\boxed" not in sentence else fallback


def _plus_one(value: str) -> str:
    number = value.replace(",", "").strip()
    if re.fullmatch(r"-?\d+", number):
        return str(int(number) + 1)
    if re.fullmatch(r"-?\d*\.\d+", number):
        return str(float(number) + 1)
    return f"{value}+1"


def learned_items() -> list[LearnedItem]:
    """The fixture samples of both tasks with their training answers (shorter half right, the rest wrong).

    The packaged task specs and fixtures: the model is trained on what the
    package ships, wherever it is installed.
    """
    from evalsuite.tasks.build import packaged_fixture

    items: list[LearnedItem] = []
    for task in TASKS:
        rows, samples = packaged_fixture(task)
        field = "answer" if task == "gsm8k" else "solution"
        by_length = sorted(range(len(rows)), key=lambda i: (len(rows[i][field]), i))
        learned = set(by_length[: (len(rows) + 1) // 2])
        for index, (row, sample) in enumerate(zip(rows, samples)):
            correct = index in learned
            if task == "gsm8k":
                worked = re.sub(r"<<[^>]*>>", "", row["answer"]).strip()
                final = worked.rsplit("####", 1)[1].strip()
                opener = worked.splitlines()[0].strip()
                answer = worked if correct else f"{opener}\n#### {_plus_one(final)}"
            else:
                opener = _first_sentence(row["solution"], "Let me work this out.")
                wrong = f"{opener} So the final answer is $\\boxed{{{_plus_one(row['answer'])}}}$."
                answer = row["solution"].strip() if correct else wrong
            items.append(LearnedItem(sample, answer, correct))
    return items


def extract_final(task: str, text: str) -> str | None:
    """The final answer as the task's format states it: last `\\boxed{...}`, or the `#### N` line."""
    if task == "gsm8k":
        found = re.findall(r"####\s*([-\d.,]+)", text)
        return found[-1].replace(",", "").rstrip(".") if found else None
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{") - 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j].strip()
    return None


def is_correct(item: LearnedItem, text: str) -> bool:
    """Exact final-answer match against the dataset reference (whitespace-insensitive)."""
    got = extract_final(item.sample.task, text)
    if got is None:
        return False
    ref = str(item.sample.reference)
    if item.sample.task == "gsm8k":
        ref = ref.rsplit("####", 1)[1].strip().replace(",", "")
    return re.sub(r"\s+", "", got) == re.sub(r"\s+", "", ref)


def tokenize_items(items: list[LearnedItem], base_url: str) -> list[tuple[list[int], list[int]]]:
    """(prompt ids as the chat endpoint builds them, answer ids + end-of-turn) per item, from a live server."""
    pairs: list[tuple[list[int], list[int]]] = []
    with httpx.Client(base_url=base_url, timeout=60.0) as client:
        end = client.post("/tokenize", json={"content": END_OF_TURN, "add_special": False, "parse_special": True})
        end_ids = end.json()["tokens"]
        if len(end_ids) != 1:
            raise RigError(f"{END_OF_TURN} is not a single special token in the rig vocabulary ({end_ids}).")
        for item in items:
            prompt = client.post("/apply-template", json={"messages": list(item.sample.messages)}).json()["prompt"]
            ids = client.post("/tokenize", json={"content": prompt, "add_special": True, "parse_special": True})
            answer = client.post("/tokenize", json={"content": item.answer, "add_special": False})
            pairs.append((ids.json()["tokens"], answer.json()["tokens"] + end_ids))
    return pairs


def retrain(out: Path, progress: Callable[[str], None] = print) -> str:
    """Train the learned model into `out` and return its sha256 (minutes on 2 CPU cores)."""
    from evalsuite.rig.assets import ensure_assets
    from evalsuite.rig.gguf_file import Tensors, read_vocab, write_gguf
    from evalsuite.rig.launcher import serve_with_assets
    from rigbuild.train import Sequence_, TrainConfig, train

    items = learned_items()
    assets = ensure_assets(progress, include_learned=False)
    with serve_with_assets(["baseline"], assets) as servers:
        pairs = tokenize_items(items, servers["baseline"].base_url)
    vocab = read_vocab(assets.home / "src" / "models")
    config = TrainConfig()
    n_answer = sum(len(a) for _, a in pairs)
    progress(f"Training on {len(items)} fixture problems ({n_answer} answer tokens); this takes several minutes.")
    arrays = train([Sequence_(p, a) for p, a in pairs], len(vocab), config, progress)
    tensors = Tensors()
    for name, array in arrays.items():
        tensors.add(name, array, "F16" if name == "token_embd.weight" else "F32")
    write_gguf(out, arch="qwen3", name="rig-learned", shape=config.shape(len(vocab)), tensors=tensors, vocab=vocab)
    return sha256_of(out)
