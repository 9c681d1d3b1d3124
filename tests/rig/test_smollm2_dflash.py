"""SmolLM2's DFlash drafter: its training data never touch an evaluated prompt, and the torch target
it is trained against is SmolLM2 as llama-server runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from projects import shared_data_dir
from test_rig_servers import Trace, assert_near_tie_divergences

from evalsuite.tasks.build import packaged_fixture
from rigbuild.smollm2_dflash import (
    PROMPT_TASKS,
    TARGET_LAYERS,
    Sequences,
    prompt_messages,
    train_questions,
)


def _rows(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}?", "answer": f"#### {i}"}) + "\n" for i in range(n)))
    return path


def test_each_question_is_asked_with_every_prompt_template_in_order(tmp_path: Path) -> None:
    rows = train_questions(_rows(tmp_path, 5), 1, 3)
    assert [r["question"] for r in rows] == ["q1?", "q2?", "q3?"]
    messages = prompt_messages(rows)
    assert len(messages) == 3 * len(PROMPT_TASKS)
    fixtures = {task: packaged_fixture(task)[1][0].messages[-1]["content"] for task in PROMPT_TASKS}
    for i, msgs in enumerate(messages):
        question, task = rows[i // len(PROMPT_TASKS)]["question"], PROMPT_TASKS[i % len(PROMPT_TASKS)]
        text = msgs[-1]["content"]
        assert text.endswith(question)
        # the task's own instructions, exactly as `eval` sends them
        assert text[: -len(question)] == fixtures[task][: len(text) - len(question)]


def test_held_out_questions_keep_both_their_prompts_out_of_training() -> None:
    n = 2 * 10
    data = Sequences([[i] for i in range(n)], [0] * n, [None] * n)
    train, held = data.split(5)
    assert [t[0] for t in held.tokens] == [8, 9, 18, 19]  # questions 4 and 9, both prompts each
    assert sorted(t[0] for t in train.tokens + held.tokens) == list(range(n))


def test_training_questions_are_not_evaluated_prompts() -> None:
    shared = shared_data_dir()
    if not (shared / "gsm8k" / "train.jsonl").is_file():
        pytest.skip(f"GSM8K's train split is not in {shared}")
    train = {json.loads(line)["question"] for line in (shared / "gsm8k" / "train.jsonl").open()}
    for task in ("gsm8k", "math500", "livecodebench"):
        for sample in packaged_fixture(task)[1]:
            assert not any(q in sample.messages[-1]["content"] for q in train if len(q) > 40), sample.id
    test = {json.loads(line)["question"] for line in (shared / "gsm8k" / "test.jsonl").open()}
    assert not train & test


@pytest.mark.rig
def test_torch_target_decodes_what_llama_server_decodes(
    rig_chat: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """The features a drafter learns from come from this forward pass, so its greedy tokens must be
    llama-server's up to a near-tie of the server's own top two (llama.cpp rounds activations to 8 bits
    for Q4_1 products, and a server started with other settings can pick the other token there too)."""
    torch = pytest.importorskip("torch")
    from evalsuite.rig.assets import ensure_assets
    from evalsuite.rig.launcher import serve_with_assets
    from rigbuild.llama_torch import LlamaTarget
    from rigbuild.smollm2_dflash import EOG_IDS, tokenize

    torch.set_num_threads(1)
    assets = ensure_assets(lambda _m: None, include_smollm2=True)
    messages = [list(s.messages) for s in packaged_fixture("gsm8k")[1][:3]]
    with serve_with_assets(["smollm2-baseline"], assets, log_dir=tmp_path, threads=1) as servers:
        url = servers["smollm2-baseline"].base_url
        prompts = tokenize(url, messages)
        served = [Trace.of(rig_chat(url, m[-1]["content"], 24)) for m in messages]
    target = LlamaTarget(assets.models["smollm2"])
    seqs = target.greedy(prompts, TARGET_LAYERS, 24, EOG_IDS, slots=2)
    ours = [Trace(s.tokens[s.start :], [], {}) for s in seqs]
    assert_near_tie_divergences("the torch target", "llama-server", served, ours)
    for s in seqs:
        assert s.features.shape == (len(s.tokens) - 1, len(TARGET_LAYERS) * target.shape.n_embd)


def test_training_without_the_train_split_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalsuite.cli import main

    missing = tmp_path / "nowhere" / "train.jsonl"
    assert main(["rig", "models", "--train-smollm2-dflash", "--gsm8k-train", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "--gsm8k-train" in err and "Traceback" not in err


def _random_sequences(gen: Any, n: int, vocab: int) -> Sequences:
    """n sequences of 20 tokens below `vocab` (answers from the fifth on) with random features."""
    import torch

    return Sequences(
        [torch.randint(3, vocab, (20,), generator=gen).tolist() for _ in range(n)],
        [4] * n,
        [torch.randn(20, 24, generator=gen).half() for _ in range(n)],
    )


class _Stop(Exception):
    pass


def _stop_at(epoch: int) -> Callable[[str], None]:
    """A progress callback that interrupts the training as it reports `epoch`."""

    def progress(message: str) -> None:
        if f"epoch {epoch}:" in message:
            raise _Stop

    return progress


def test_an_interrupted_training_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from rigbuild.smollm2_dflash import SmolDFlashConfig, train_smol_drafter

    gen = torch.Generator().manual_seed(1)
    train, held = _random_sequences(gen, 8, 40).split(2)
    embd, norm = torch.randn(40, 16, generator=gen).numpy(), torch.ones(16).numpy()
    config = SmolDFlashConfig(n_layer=1, n_head=2, n_ff=32, n_draft=3, epochs=3, anchors=4, negatives=8)
    whole_checkpoint = tmp_path / "whole.pt"
    whole, _ = train_smol_drafter(train, held, embd, norm, config, lambda _msg: None, whole_checkpoint)
    checkpoint = tmp_path / "training.pt"
    with pytest.raises(_Stop):
        train_smol_drafter(train, held, embd, norm, config, _stop_at(2), checkpoint)
    said: list[str] = []
    resumed, _ = train_smol_drafter(train, held, embd, norm, config, said.append, checkpoint)
    assert said[0].strip().startswith("resuming after epoch 1"), said
    assert not any("epoch 1:" in m for m in said), said
    assert whole.keys() == resumed.keys()
    for name in whole:
        assert (whole[name] == resumed[name]).all(), name
    # the last epoch's state too (the weights returned are the best epoch's, maybe an early one)
    ends = [torch.load(path, weights_only=False) for path in (whole_checkpoint, checkpoint)]
    assert [end["epoch"] for end in ends] == [3, 3]
    for name, value in ends[0]["params"].items():
        assert torch.equal(value, ends[1]["params"][name]), name


def test_a_second_stage_resumes_from_both_checkpoints_to_the_uninterrupted_weights(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from rigbuild.smollm2_dflash import SmolDFlashConfig, train_smol_drafter

    gen = torch.Generator().manual_seed(2)
    # the added set brings tokens of its own
    first, added = _random_sequences(gen, 8, 30).split(2), _random_sequences(gen, 8, 40).split(2)
    embd, norm = torch.randn(40, 16, generator=gen).numpy(), torch.ones(16).numpy()
    config = SmolDFlashConfig(
        n_layer=1, n_head=2, n_ff=32, n_draft=3, epochs=2, anchors=4, negatives=8, second_epochs=2
    )
    said_whole: list[str] = []
    whole, result = train_smol_drafter(*first, embd, norm, config, said_whole.append, tmp_path / "whole.pt", added)
    assert [m.split(":")[0].strip() for m in said_whole if "epoch" in m] == [f"epoch {e}" for e in range(1, 5)]
    assert result.steps > 0
    checkpoint = tmp_path / "training.pt"
    with pytest.raises(_Stop):
        train_smol_drafter(*first, embd, norm, config, _stop_at(4), checkpoint, added)
    said: list[str] = []
    resumed, _ = train_smol_drafter(*first, embd, norm, config, said.append, checkpoint, added)
    resumes = [m.strip() for m in said if "resuming" in m]
    assert resumes[0].startswith("resuming after epoch 2") and resumes[1].startswith("resuming after epoch 3"), said
    assert [m.split(":")[0].strip() for m in said if m.strip().startswith("epoch")] == ["epoch 4"]
    for name in whole:
        assert (whole[name] == resumed[name]).all(), name
    # without the added set, the same first stage alone: the second stage changed the weights
    alone, _ = train_smol_drafter(*first, embd, norm, config, lambda _m: None, tmp_path / "alone.pt")
    assert any((alone[name] != whole[name]).any() for name in whole)


def test_math_train_problems_are_none_of_math500s() -> None:
    from evalsuite.tasks.data import read_jsonl
    from rigbuild.smollm2_dflash import MATH_TRAIN, math_train_messages

    rows = list(read_jsonl(MATH_TRAIN))
    assert len(rows) == 1024 and len({r["problem"] for r in rows}) == 1024
    evaluated = {str(r["problem"]).strip() for r in packaged_fixture("math500")[0]}
    shared = shared_data_dir() / "math500" / "test.jsonl"
    if shared.is_file():
        evaluated |= {str(r["problem"]).strip() for r in read_jsonl(shared)}
        assert len(evaluated) == 500
    assert not evaluated & {str(r["problem"]).strip() for r in rows}
    messages = math_train_messages(MATH_TRAIN)
    assert len(messages) == len(rows)
    template = packaged_fixture("math500")[1][0].messages[-1]["content"]
    for row, msgs in zip(rows, messages):
        text, problem = msgs[-1]["content"], row["problem"].strip()
        assert text.endswith(problem) and template.startswith(text[: -len(problem)])


def test_a_chunk_is_generated_by_one_process_and_a_dead_claim_is_taken_over(tmp_path: Path) -> None:
    from rigbuild.smollm2_dflash import _claim

    chunk = tmp_path / "chunk-000000-000256.pt"
    assert _claim(chunk)
    assert chunk.with_suffix(".claim").read_text() == str(os.getpid())
    other = tmp_path / "chunk-000256-000512.pt"
    other.with_suffix(".claim").write_text("1")  # a live process (init) holds it
    assert not _claim(other)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    other.with_suffix(".claim").write_text(gone.stdout.strip())  # its owner has exited
    assert _claim(other)
    assert other.with_suffix(".claim").read_text() == str(os.getpid())


def _tiny_llama(seed: int = 0) -> Any:
    """A random llama-layout target small enough to decode in milliseconds."""
    torch = pytest.importorskip("torch")
    from evalsuite.rig.gguf_file import Shape
    from rigbuild.llama_torch import LlamaTarget

    shape = Shape(n_vocab=40, n_embd=32, n_layer=3, n_head=4, n_head_kv=2, n_ff=48)
    gen = torch.Generator().manual_seed(seed)
    kv = shape.n_head_kv * shape.head_dim
    sizes = {
        "attn_norm": (32,),
        "attn_q": (32, 32),
        "attn_k": (kv, 32),
        "attn_v": (kv, 32),
        "attn_output": (32, 32),
        "ffn_norm": (32,),
        "ffn_gate": (48, 32),
        "ffn_up": (48, 32),
        "ffn_down": (32, 48),
    }
    arrays = {"token_embd.weight": torch.randn(40, 32, generator=gen), "output_norm.weight": torch.ones(32)}
    for il in range(shape.n_layer):
        for name, size in sizes.items():
            arrays[f"blk.{il}.{name}.weight"] = (
                torch.ones(size) if len(size) == 1 else torch.randn(size, generator=gen) / 4
            )
    return LlamaTarget.of(shape, arrays)


PROMPTS = [[5, 9, 11], [7, 3, 3, 8, 21, 30], [12], [4, 4, 6, 17, 25]]
LAYERS = (0, 2)


def test_features_made_from_kept_answers_are_those_decoding_kept() -> None:
    torch = pytest.importorskip("torch")
    target = _tiny_llama()
    decoded = target.greedy(PROMPTS, LAYERS, 10, frozenset({0}), slots=2)
    again = target.features([(s.tokens, s.start) for s in decoded], LAYERS, batch=3)
    assert [s.tokens for s in again] == [s.tokens for s in decoded]
    assert [s.start for s in again] == [len(p) for p in PROMPTS]
    for made, kept in zip(again, decoded):
        assert made.features.shape == kept.features.shape == (len(kept.tokens) - 1, 2 * 32)
        torch.testing.assert_close(made.features.float(), kept.features.float(), atol=2e-2, rtol=1e-2)


def test_kept_answers_replace_decoding_on_a_machine_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    from evalsuite.rig.errors import RigError
    from rigbuild import llama_torch
    from rigbuild.smollm2_dflash import generate_chunks, load_answers

    target = _tiny_llama()
    monkeypatch.setattr(llama_torch, "LlamaTarget", lambda _path: target)
    answers, cache = tmp_path / "answers", tmp_path / "cache"
    paths = generate_chunks(tmp_path / "model.gguf", PROMPTS, cache, chunk=3, slots=2, answers=answers)
    kept = sorted(answers.glob("*.npz"))
    assert [p.stem for p in kept] == [p.stem for p in paths] == ["chunk-000000-000003", "chunk-000003-000004"]
    first = torch.load(paths[0])
    assert load_answers(kept[0]) == [(tokens, start) for tokens, start, _ in first]

    def no_decoding(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("decoded although its answers were kept")

    monkeypatch.setattr(target, "greedy", no_decoding)
    for path in paths:
        path.unlink()
    said: list[str] = []
    generate_chunks(tmp_path / "model.gguf", PROMPTS, cache, chunk=3, answers=answers, progress=said.append)
    assert sum("features of the kept answers" in m for m in said) == 2, said
    remade = torch.load(paths[0])
    assert [(t, s) for t, s, _ in remade] == [(t, s) for t, s, _ in first]
    for (_, _, made), (_, _, decoded) in zip(remade, first):
        torch.testing.assert_close(made.float(), decoded.float(), atol=2e-2, rtol=1e-2)

    kept[1].unlink()  # a chunk in the cache whose answers are missing: they are written from it
    generate_chunks(tmp_path / "model.gguf", PROMPTS, cache, chunk=3, answers=answers)
    assert load_answers(kept[1]) == [(t, s) for t, s, _ in torch.load(paths[1])]

    paths[0].unlink()
    other = [[5, 9, 12], *PROMPTS[1:]]
    with pytest.raises(RigError, match=str(kept[0])):
        generate_chunks(tmp_path / "model.gguf", other, cache, chunk=3, answers=answers)


def test_a_damaged_answers_file_is_named(tmp_path: Path) -> None:
    import numpy as np

    from evalsuite.rig.errors import RigError
    from rigbuild.smollm2_dflash import load_answers, save_answers

    path = tmp_path / "a.npz"
    save_answers(path, [([1, 2, 3, 4], 2), ([7, 8], 1)])
    assert load_answers(path) == [([1, 2, 3, 4], 2), ([7, 8], 1)]
    with path.open("wb") as fh:
        np.savez_compressed(fh, tokens=np.arange(5, dtype=np.uint32), lengths=np.array([4, 2]), starts=np.array([2, 1]))
    with pytest.raises(RigError, match="a.npz"):
        load_answers(path)


def test_prompts_decoded_together_are_decoded_as_each_alone() -> None:
    """Slots that take the next prompt, and the cache that drops finished slots' rows, change no answer."""
    torch = pytest.importorskip("torch")
    target = _tiny_llama()
    prompts = [*PROMPTS, [9, 2]]  # the last two take slots as the first three end: two live rows of three
    together = target.greedy(prompts, LAYERS, 10, frozenset({0}), slots=3)
    for prompt, seq in zip(prompts, together):
        (alone,) = target.greedy([prompt], LAYERS, 10, frozenset({0}), slots=1)
        assert (seq.tokens, seq.start) == (alone.tokens, alone.start)
        torch.testing.assert_close(seq.features.float(), alone.features.float(), atol=2e-2, rtol=1e-2)
