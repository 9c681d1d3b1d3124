"""The model files a server command names, and digests of their contents for the run fingerprint.

A run is resumed only when its fingerprint is the same, and a command line
names its files by path: a drafter retrained into the same file would
otherwise resume a run the old drafter began, and the run would mix two
drafters' outputs without saying so.  So every model file (or model folder,
as vLLM takes them) the command names is hashed, and the digests join the
fingerprint.  Hashing a large model takes a while once; the digest is then
kept in the cache, keyed by the file's path, size and modification time.

What counts as a model file: any argument ending in `.gguf` (also as
`--flag=path.gguf`), the value of a model flag (`-m`, `--model`, `-md`,
`--model-draft`, `--spec-draft-model`, `--mmproj`) written as a path (it
starts with `/`, `./`, `../` or `~`), and the `model` of a JSON argument
such as vLLM's `--speculative-config` when it is written as a path.  A hub
id such as `Qwen/Qwen3-8B` is left to the server: it names no file here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MODEL_FLAGS = ("-m", "--model", "-md", "--model-draft", "--spec-draft-model", "--mmproj")
PATH_PREFIXES = ("/", "./", "../", "~")
CACHE_NAME = "file-digests.json"
MISSING = "missing"
SAY_ABOVE = 256 << 20
"""Hashing a file larger than this (a second or more) is said first, so that the wait is explained."""


def model_paths(argv: Sequence[str]) -> list[str]:
    """The model files and folders the command names, as written, in order, each once (argv[0] is the program)."""
    found: list[str] = []
    for i, arg in enumerate(argv[1:], start=1):
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        previous = argv[i - 1]
        if value.endswith(".gguf") and "{" not in value:
            found.append(value)
        elif previous in MODEL_FLAGS and value.startswith(PATH_PREFIXES):
            found.append(value)
        elif value.startswith("{"):
            nested = _json_model(value)
            if nested is not None:
                found.append(nested)
    return list(dict.fromkeys(found))


def _json_model(value: str) -> str | None:
    with contextlib.suppress(ValueError):
        parsed: Any = json.loads(value)
        if isinstance(parsed, dict) and isinstance(parsed.get("model"), str):
            model: str = parsed["model"]
            if model.startswith(PATH_PREFIXES) or model.endswith(".gguf"):
                return model
    return None


def model_digests(
    argv: Sequence[str], cwd: Path | None, cache: Path | None, say: Callable[[str], None] | None = None
) -> dict[str, str]:
    """`{name as written: "sha256:<hex>"}` for each model file or folder of the command ("missing" if gone)."""
    base = cwd or Path.cwd()
    known = _load(cache)
    out: dict[str, str] = {}
    for value in model_paths(argv):
        path = (base / Path(value).expanduser()).resolve()
        out[value] = _digest(path, known, say)
    if cache is not None:
        _save(cache, known)
    return out


def _digest(path: Path, known: dict[str, list[Any]], say: Callable[[str], None] | None) -> str:
    if path.is_dir():
        folder = hashlib.sha256()
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            folder.update(f"{child.relative_to(path).as_posix()}\0{_digest(child, known, say)}\n".encode())
        return f"sha256:{folder.hexdigest()}"
    try:
        stat = path.stat()
    except OSError:
        return MISSING
    key, stamp = str(path), [stat.st_size, stat.st_mtime_ns]
    entry = known.get(key)
    if entry is not None and entry[:2] == stamp:
        return str(entry[2])
    if say is not None and stat.st_size > SAY_ABOVE:
        say(f"hashing {path} ({stat.st_size / 2**30:.1f} GiB) for the run's provenance, once per version of the file")
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    known[key] = [*stamp, f"sha256:{digest.hexdigest()}"]
    return str(known[key][2])


def _load(cache: Path | None) -> dict[str, list[Any]]:
    if cache is None or not cache.is_file():
        return {}
    try:
        data = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}  # a damaged cache only costs hashing again
    return {k: v for k, v in data.items() if isinstance(v, list) and len(v) == 3} if isinstance(data, dict) else {}


def _save(cache: Path, known: dict[str, list[Any]]) -> None:
    """Write the cache whole or not at all (a cache that cannot be written only costs hashing again)."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=".digests-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(known, fh, sort_keys=True)
        os.replace(tmp, cache)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
