"""Dataset rows from the hub (pinned), a local file, or a bundled fixture subset.

Whichever source is used, the run records which one and its identity (hub
revision, or the file's sha256), so two runs on different data never compare.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from evalsuite.errors import DatasetError, describe_read_error, reading
from evalsuite.tasks.packaged import packaged_fixtures
from evalsuite.tasks.schema import TaskSpec

DataChoice = Literal["hf", "local", "fixture"]


@dataclass(frozen=True)
class DatasetIdentity:
    """What pins the data a run saw: goes into the run fingerprint."""

    source: DataChoice
    location: str
    revision: str  # hub revision, or sha256 of the file bytes


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines file (optionally gzipped); a malformed line is named by file and line number."""
    rows: list[dict[str, Any]] = []
    gzipped = path.name.endswith(".gz")
    lineno = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") if gzipped else path.open("r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}, line {lineno}: not valid JSON ({exc.msg}).") from None
                if not isinstance(row, dict):
                    raise DatasetError(f"{path}, line {lineno}: expected a JSON object, got {type(row).__name__}.")
                rows.append(row)
    except UnicodeDecodeError:
        raise DatasetError(f"{path}, line {lineno + 1}: not UTF-8 text; save the file as UTF-8.") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path} is not a valid gzip file ({exc or 'it ends too early'}).") from None
    except OSError as exc:
        raise DatasetError(describe_read_error(path, exc)) from None
    return rows


def _read_json(path: Path) -> list[dict[str, Any]]:
    with reading(path, DatasetError):
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg}).") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json dataset must be a list of objects.")
    for index, row in enumerate(data):
        if not isinstance(row, dict):
            raise DatasetError(f"{path}: item {index + 1} is a {type(row).__name__}, not a JSON object.")
    return data


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    with reading(path, DatasetError):
        try:
            return pd.read_parquet(path).to_dict(orient="records")
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
                raise
            raise DatasetError(f"{path} is not a readable Parquet file ({str(exc).splitlines()[0]}).") from None


def read_local(path: Path) -> list[dict[str, Any]]:
    """Rows of a local JSONL (optionally .gz), JSON (list of objects) or Parquet file.

    Every way the file can be unreadable (missing, a folder, not UTF-8, not
    gzip, not Parquet) is a DatasetError naming the file.
    """
    if not path.exists():
        raise DatasetError(f"Dataset file {path} does not exist.")
    if path.is_dir():
        raise DatasetError(f"Dataset file {path} is a folder, not a file.")
    suffix = "".join(path.suffixes[-2:]) if path.name.endswith(".gz") else path.suffix
    if suffix in (".jsonl", ".jsonl.gz"):
        return read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    if suffix == ".parquet":
        return _read_parquet(path)
    raise DatasetError(f"{path}: unsupported dataset format '{suffix}' (use .jsonl, .jsonl.gz, .json or .parquet).")


def _adapter(spec: TaskSpec) -> ModuleType | None:
    if spec.dataset.adapter is None:
        return None
    from evalsuite.tasks.adapters import find_adapter  # by entry-point name or import path

    try:
        return find_adapter(spec.dataset.adapter)
    except DatasetError as exc:
        raise DatasetError(f"Task '{spec.name}': {exc}") from None


def load_rows(
    spec: TaskSpec, choice: DataChoice, *, root: Path, path: str | None = None
) -> tuple[list[dict[str, Any]], DatasetIdentity]:
    """Rows for a task from the chosen source, with the identity that pins them.

    A task with a `dataset.adapter` has its rows passed through the adapter's
    `prepare_rows(rows, options)`, and its options are appended to the
    identity's location, so runs with another release or date window never
    compare as the same data.
    """
    adapter = _adapter(spec)
    rows, identity = _load_raw(spec, choice, root=root, path=path, adapter=adapter)
    if adapter is not None:
        rows = adapter.prepare_rows(rows, spec.dataset.options)
        if spec.dataset.options:
            opts = ",".join(f"{k}={v}" for k, v in sorted(spec.dataset.options.items()) if v not in (None, ""))
            identity = DatasetIdentity(identity.source, f"{identity.location}[{opts}]", identity.revision)
    if not rows:
        after = " after the task's dataset adapter filtered them" if adapter is not None else ""
        raise DatasetError(
            f"Task '{spec.name}': the dataset {identity.location} ({identity.source}) has no rows"
            f"{after}; nothing to evaluate."
        )
    return rows, identity


def fixture_file(name: str, root: Path) -> Path:
    """A fixture subset: the project's own `fixtures/NAME` next to its config, else the one packaged with evalsuite.

    So the built-in tasks run offline (`--data fixture`) from any folder,
    and a project can still bring its own subset under the same name.
    """
    own = root / "fixtures" / name
    if own.exists():
        return own
    packaged = packaged_fixtures() / name
    if packaged.exists():
        return packaged
    raise DatasetError(
        f"Fixture subset {name} is neither in {own.parent} nor among the packaged ones ({packaged.parent})."
    )


def _load_raw(
    spec: TaskSpec, choice: DataChoice, *, root: Path, path: str | None, adapter: ModuleType | None
) -> tuple[list[dict[str, Any]], DatasetIdentity]:
    if choice == "hf" and spec.dataset.hf is not None and adapter is not None and hasattr(adapter, "load_hf"):
        hf = spec.dataset.hf
        rows, location = adapter.load_hf(hf.path, hf.revision, spec.dataset.options)
        return rows, DatasetIdentity("hf", location, hf.revision)
    if choice == "hf":
        if spec.dataset.hf is None:
            raise DatasetError(f"Task '{spec.name}' has no Hugging Face source; use a local file or the fixture.")
        hf = spec.dataset.hf
        try:
            import datasets

            ds = datasets.load_dataset(hf.path, hf.name, split=hf.split, revision=hf.revision)
        except Exception as exc:  # the hub raises many types; the user needs one sentence
            raise DatasetError(
                f"Could not load {hf.path} ({hf.name or 'default'}, split {hf.split}, revision {hf.revision}) "
                f"from the Hugging Face hub: {exc}. Offline? Use --data local --data-path FILE or --data fixture."
            ) from None
        location = f"{hf.path}:{hf.name or ''}:{hf.split}"
        return [dict(r) for r in ds], DatasetIdentity("hf", location, hf.revision)
    if choice == "fixture":
        if spec.dataset.fixture is None:
            raise DatasetError(f"Task '{spec.name}' has no fixture subset.")
        file = fixture_file(spec.dataset.fixture, root)
    else:
        chosen = path or spec.dataset.local
        if chosen is None:
            raise DatasetError(f"Task '{spec.name}': --data local needs --data-path FILE.")
        file = Path(chosen) if Path(chosen).is_absolute() else (root / chosen)
    file = file.resolve()
    rows = read_local(file)
    return rows, DatasetIdentity(choice, file.name, "sha256:" + _sha256(file))
