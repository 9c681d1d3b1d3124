"""Which model files a server command names, and the digests of their contents that join a run's fingerprint."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalsuite.serve.files import MISSING, model_digests, model_paths


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["llama-server", "-m", "/m/target.gguf", "-md", "./draft.gguf"], ["/m/target.gguf", "./draft.gguf"]),
        (["llama-server", "--model=../t.gguf", "--spec-draft-model=~/d.gguf"], ["../t.gguf", "~/d.gguf"]),
        (["vllm", "serve", "Qwen/Qwen3-8B", "--model", "Qwen/Qwen3-8B"], []),  # hub ids name no file
        (["vllm", "--model", "/w/smollm2", "--model", "/w/smollm2"], ["/w/smollm2"]),  # each once
        (
            ["python", "--model", "/w/t", "--speculative-config", json.dumps({"method": "dflash", "model": "/w/d"})],
            ["/w/t", "/w/d"],
        ),
        (["python", "--speculative-config", json.dumps({"method": "eagle3", "model": "org/eagle"})], []),
        (["llama-server", "--port", "{port}", "--lora", "x.gguf", "--chat-template", "{x}"], ["x.gguf"]),
    ],
)
def test_the_model_files_a_command_names(argv: list[str], expected: list[str]) -> None:
    assert model_paths(argv) == expected


def test_digests_follow_the_contents_of_files_and_folders(tmp_path: Path) -> None:
    (tmp_path / "t.gguf").write_bytes(b"target")
    folder = tmp_path / "drafter"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "weights.bin").write_bytes(b"w1")
    argv = ["srv", "-m", "./t.gguf", "--speculative-config", json.dumps({"model": "./drafter"}), "-md", "./gone.gguf"]
    first = model_digests(argv, tmp_path, None)
    assert first["./t.gguf"] == _sha(b"target") and first["./gone.gguf"] == MISSING
    assert first["./drafter"].startswith("sha256:") and model_digests(argv, tmp_path, None) == first
    (folder / "sub" / "weights.bin").write_bytes(b"w2")
    second = model_digests(argv, tmp_path, None)
    assert second["./drafter"] != first["./drafter"] and second["./t.gguf"] == first["./t.gguf"]
    (folder / "sub" / "weights.bin").rename(folder / "weights.bin")  # same bytes, another place in the folder
    assert model_digests(argv, tmp_path, None)["./drafter"] != second["./drafter"]


def test_the_cache_is_keyed_by_path_size_and_modification_time(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "digests.json"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"first")
    argv = ["srv", "-m", str(model)]
    assert model_digests(argv, None, cache) == {str(model): _sha(b"first")}
    assert str(model) in json.loads(cache.read_text())
    stamp = model.stat()
    model.write_bytes(b"other")  # the same size; with its old time restored, the cache answers unread
    os.utime(model, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert model_digests(argv, None, cache) == {str(model): _sha(b"first")}
    os.utime(model, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1))
    assert model_digests(argv, None, cache) == {str(model): _sha(b"other")}
    cache.write_text("{not json")  # a damaged cache costs hashing again, never the run
    assert model_digests(argv, None, cache) == {str(model): _sha(b"other")}
    assert json.loads(cache.read_text())[str(model)][2] == _sha(b"other")


def test_hashing_a_large_file_is_said_once_per_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evalsuite.serve.files.SAY_ABOVE", 3)
    cache = tmp_path / "digests.json"
    (tmp_path / "big.gguf").write_bytes(b"large")
    (tmp_path / "s.gguf").write_bytes(b"3")
    said: list[str] = []
    argv = ["srv", "-m", "./big.gguf", "-md", "./s.gguf"]
    model_digests(argv, tmp_path, cache, said.append)
    model_digests(argv, tmp_path, cache, said.append)  # cached: nothing to hash, nothing said
    assert len(said) == 1 and "big.gguf" in said[0] and "provenance" in said[0]
    (tmp_path / "big.gguf").write_bytes(b"larger")  # a new version: hashed, and said, again
    model_digests(argv, tmp_path, cache, said.append)
    assert len(said) == 2 and "big.gguf" in said[1]


def test_a_cache_that_cannot_be_written_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"m")
    folder = tmp_path / "cache"
    folder.mkdir()
    cache = folder / "digests.json"
    cache.mkdir()  # a folder where the file should go: replacing it fails
    assert model_digests(["srv", "-m", "./m.gguf"], tmp_path, cache) == {"./m.gguf": _sha(b"m")}
    assert [p.name for p in folder.iterdir()] == ["digests.json"]


def test_files_are_named_in_the_fingerprint_by_name_unless_two_share_one() -> None:
    from evalsuite.runner import _endpoint_fields

    def fields(files: dict[str, str]) -> object:
        plan = SimpleNamespace(target=SimpleNamespace(rig=None, serve=None, base_url="http://x/v1"), model_files=files)
        return _endpoint_fields(plan)["model_files"]  # type: ignore[arg-type]

    assert fields({"/cache/a/t.gguf": "sha256:1", "/cache/a/d.gguf": "sha256:2"}) == {
        "t.gguf": "sha256:1",
        "d.gguf": "sha256:2",
    }
    same = {"/a/model.gguf": "sha256:1", "/b/model.gguf": "sha256:2"}
    assert fields(same) == same
