"""The llama.cpp DFlash drafter exported for vLLM, without vLLM: names, shapes, values, config, refusal, caching.

A tiny drafter GGUF is written the way the rig writes SmolLM2's
(`write_gguf`, architecture `dflash`, f16 matrices and f32 norms) with
shapes that differ on purpose (width 8, 2 heads of 4, one KV head, FFN 12,
two blocks, RoPE base 1e5, eps 1e-5), so a field read from the wrong key or a
transposed matrix shows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalsuite.rig.errors import RigError
from evalsuite.rig.gguf_file import Shape, Tensors, Vocab, write_gguf
from evalsuite.rig.smollm2 import SMOLLM2_DFLASH
from evalsuite.rig.vllm import configs, models
from evalsuite.rig.vllm.dflash_export import (
    EXPORT_FORMAT,
    dflash_config,
    export_dflash,
    read_drafter,
    read_safetensors,
    vllm_tensor_name,
)

SHAPE = Shape(n_vocab=16, n_embd=8, n_layer=2, n_head=2, n_head_kv=1, n_ff=12, n_ctx=64, rope_base=1e5, rms_eps=1e-5)
LAYERS = (1, 3, 4)
"""llama.cpp target layers (block inputs) of the tiny drafter, for a 4-block target."""
MASK_ID = 3


def _vocab(n: int = SHAPE.n_vocab) -> Vocab:
    tokens = ["<unk>", "<s>", "</s>", "<mask>"] + [f"w{i}" for i in range(n - 4)]
    types = np.array([2, 3, 3, 3] + [1] * (n - 4), dtype=np.int32)
    return Vocab("llama", "default", tokens, np.zeros(n, np.float32), types, 1, 2, 0, 2, True, False, "")


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    e, hd, kv, ff = SHAPE.n_embd, SHAPE.head_dim, SHAPE.n_head_kv * SHAPE.head_dim, SHAPE.n_ff

    def m(rows: int, cols: int) -> np.ndarray:  # values f16 holds exactly, so the f32 export must equal them
        return rng.standard_normal((rows, cols)).astype(np.float16).astype(np.float32)

    arrays = {
        "fc.weight": m(e, e * len(LAYERS)),
        "enc.output_norm.weight": rng.random(e).astype(np.float32),
        "output_norm.weight": rng.random(e).astype(np.float32),
    }
    for i in range(SHAPE.n_layer):
        p = f"blk.{i}."
        arrays |= {
            p + "attn_norm.weight": rng.random(e).astype(np.float32),
            p + "attn_q.weight": m(e, e),
            p + "attn_k.weight": m(kv, e),
            p + "attn_v.weight": m(kv, e),
            p + "attn_output.weight": m(e, e),
            p + "attn_q_norm.weight": rng.random(hd).astype(np.float32),
            p + "attn_k_norm.weight": rng.random(hd).astype(np.float32),
            p + "ffn_norm.weight": rng.random(e).astype(np.float32),
            p + "ffn_gate.weight": m(ff, e),
            p + "ffn_up.weight": m(ff, e),
            p + "ffn_down.weight": m(e, ff),
        }
    return arrays


def _drafter(path: Path, seed: int = 0, layers: tuple[int, ...] = LAYERS) -> dict[str, np.ndarray]:
    arrays = _arrays(seed)
    tensors = Tensors()
    for name, array in arrays.items():
        tensors.add(name, array, "F16" if array.ndim == 2 else "F32")
    extra = {"dflash.block_size": 5, "dflash.target_layers": list(layers), "tokenizer.ggml.mask_token_id": MASK_ID}
    write_gguf(path, arch="dflash", name="tiny-dflash", shape=SHAPE, tensors=tensors, vocab=_vocab(), extra=extra)
    return arrays


def _target(folder: Path, blocks: int = 4, width: int = SHAPE.n_embd) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"num_hidden_layers": blocks, "hidden_size": width, "vocab_size": SHAPE.n_vocab}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_every_tensor_reaches_vllm_under_its_name_with_its_shape_and_values(tmp_path: Path) -> None:
    arrays = _drafter(tmp_path / "d.gguf")
    export_dflash(tmp_path / "d.gguf", _target(tmp_path / "target"), tmp_path / "out")
    written = read_safetensors(tmp_path / "out" / "model.safetensors")
    assert sorted(written) == sorted(vllm_tensor_name(n) for n in arrays)
    assert len(written) == 3 + 11 * SHAPE.n_layer
    for name, array in arrays.items():
        got = written[vllm_tensor_name(name)]
        assert got.dtype == np.float32 and got.shape == array.shape, name  # torch layout [out, in], not transposed
        np.testing.assert_array_equal(got, array, err_msg=name)
    assert written["fc.weight"].shape == (8, 24) and written["layers.1.self_attn.k_proj.weight"].shape == (4, 8)
    assert "embed_tokens.weight" not in written and "lm_head.weight" not in written  # shared from the target
    np.testing.assert_array_equal(written["hidden_norm.weight"], arrays["enc.output_norm.weight"])
    np.testing.assert_array_equal(written["layers.0.mlp.down_proj.weight"], arrays["blk.0.ffn_down.weight"])


def test_config_is_the_zlab_layout_with_fields_from_the_gguf_and_the_target(tmp_path: Path) -> None:
    _drafter(tmp_path / "d.gguf")
    export_dflash(tmp_path / "d.gguf", _target(tmp_path / "target"), tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"] and config["model_type"] == "qwen3"
    assert config["dflash_config"] == {"mask_token_id": MASK_ID, "target_layer_ids": [0, 2, 3]}  # layers - 1
    assert (config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]) == (8, 12, 2)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (2, 1, 4)
    assert config["rope_parameters"] == {"rope_type": "default", "rope_theta": 100000.0}
    assert config["rms_norm_eps"] == 1e-5 and config["vocab_size"] == 16 and config["max_position_embeddings"] == 64
    assert config["block_size"] == 5 and config["num_target_layers"] == 4
    assert config["tie_word_embeddings"] is False


def test_the_same_gguf_always_gives_the_same_bytes(tmp_path: Path) -> None:
    _drafter(tmp_path / "d.gguf")
    target = _target(tmp_path / "target")
    export_dflash(tmp_path / "d.gguf", target, tmp_path / "a")
    export_dflash(tmp_path / "d.gguf", target, tmp_path / "b")
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_drafter_that_does_not_fit_the_target_is_refused(tmp_path: Path) -> None:
    _drafter(tmp_path / "d.gguf")
    with pytest.raises(RigError, match="not a pair"):
        export_dflash(tmp_path / "d.gguf", _target(tmp_path / "wide", width=16), tmp_path / "out")
    with pytest.raises(RigError, match=r"layer\(s\) \[4\]"):  # the 3-block target has no layer 4
        export_dflash(tmp_path / "d.gguf", _target(tmp_path / "short", blocks=3), tmp_path / "out")
    _drafter(tmp_path / "emb.gguf", layers=(0, 2))
    with pytest.raises(RigError, match="not the embeddings"):
        dflash_config(read_drafter(tmp_path / "emb.gguf"), {"num_hidden_layers": 4, "hidden_size": 8, "vocab_size": 16})
    assert not (tmp_path / "out").exists()
    with pytest.raises(RigError, match="no place"):
        vllm_tensor_name("blk.0.attn_gate.weight")
    write_gguf(tmp_path / "q.gguf", arch="qwen3", name="q", shape=SHAPE, tensors=Tensors(), vocab=_vocab())
    with pytest.raises(RigError, match="not a llama.cpp DFlash drafter"):
        read_drafter(tmp_path / "q.gguf")


def test_vllm_dflash_serves_the_exported_folder_drafting_as_many_tokens_as_llama_cpp(tmp_path: Path) -> None:
    from evalsuite.rig.launcher import RIG_CONFIGS

    llama = RIG_CONFIGS["smollm2-dflash"].spec_args
    n_max = int(llama[llama.index("--spec-draft-n-max") + 1])
    config = configs.VLLM_CONFIGS["vllm-dflash"]
    assert config.lossless and config.compare_to == "vllm-baseline"
    folders = {"smollm2": tmp_path / "smollm2", "smollm2-dflash": tmp_path / "dflash"}
    args = configs.vllm_args(config, Path("python"), folders, 1234)
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec == {"method": "dflash", "model": str(tmp_path / "dflash"), "num_speculative_tokens": n_max}
    assert args[args.index("--model") + 1] == str(tmp_path / "smollm2")
    if SMOLLM2_DFLASH.is_file():  # and as many as the committed drafter was trained to draft
        assert read_drafter(SMOLLM2_DFLASH).block_size == n_max + 1


def test_vllm_dflash_without_its_drafter_file_is_refused_by_name_before_any_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    absent = tmp_path / "smollm2-dflash.gguf"
    monkeypatch.setitem(models.DRAFTERS, "smollm2-dflash", (absent, *models.DRAFTERS["smollm2-dflash"][1:]))

    def no_install(*_a: object) -> Path:
        raise AssertionError("vLLM must not be installed for a refused configuration")

    monkeypatch.setattr("evalsuite.rig.vllm.env.ensure_vllm_env", no_install)
    with pytest.raises(RigError) as refused:
        configs.vllm_commands(["vllm-baseline", "vllm-dflash"])
    message = str(refused.value)
    assert "'vllm-dflash'" in message and "--train-smollm2-dflash" in message and "docs/rig.md" in message


def test_the_exported_folder_is_redone_when_the_committed_drafter_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EVALSUITE_CACHE", str(tmp_path / "cache"))
    gguf, target = tmp_path / "fixtures" / "smollm2-dflash.gguf", _target(tmp_path / "target")
    _drafter(gguf, seed=0)
    rebuild = "evalsuite rig models --train-smollm2-dflash --update-checksum"
    say: list[str] = []
    folder = models._ensure_drafter("smollm2-dflash", gguf, target, rebuild, say.append)
    first = read_safetensors(folder / "model.safetensors")["fc.weight"].copy()
    stamp = f"gguf {models.sha256_of(gguf)} export {EXPORT_FORMAT}"
    assert (folder / ".evalsuite-source").read_text().strip() == stamp
    models._ensure_drafter("smollm2-dflash", gguf, target, rebuild, say.append)
    assert len(say) == 1  # the same GGUF: the folder is reused
    _drafter(gguf, seed=1)  # a retrained drafter lands
    models._ensure_drafter("smollm2-dflash", gguf, target, rebuild, say.append)
    assert len(say) == 2
    again = read_safetensors(folder / "model.safetensors")["fc.weight"]
    assert not np.array_equal(first, again)
    gguf.with_name(gguf.name + ".sha256").write_text("0" * 64 + "\n")  # a file that is not the committed one
    with pytest.raises(RigError, match="--train-smollm2-dflash"):
        models._ensure_drafter("smollm2-dflash", gguf, target, rebuild, say.append)
