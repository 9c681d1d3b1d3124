"""Task specs: a task is data (a YAML file in `tasks/`), not code.

A spec names its dataset sources, how to build a prompt from a row, which
fields give the id, the reference answer and the strata, and which grader
scores it.  A variant (another prompt, few-shot) is a new small file that
`include:`s the base spec and overrides a few keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalsuite.errors import ConfigError, format_validation_error


class HFSource(BaseModel):
    """A Hugging Face hub dataset pinned to a revision."""

    model_config = ConfigDict(extra="forbid")
    path: str
    name: str | None = None
    split: str = "test"
    revision: str


class DataSources(BaseModel):
    """Where a task's rows can come from; which one is used is chosen per run."""

    model_config = ConfigDict(extra="forbid")
    hf: HFSource | None = None
    fixture: str | None = Field(None, description="file under fixtures/, a small real subset for tests")
    local: str | None = Field(None, description="default local JSONL/Parquet path for offline use")
    adapter: str | None = Field(
        None,
        description="adapter name in the evalsuite.task_adapters entry points (or a module path): "
        "prepare_rows(rows, options) run on every source's rows (decode, filter, derive fields), optionally "
        "load_hf(path, revision, options) for hub data `datasets` cannot load and, for code tasks, "
        "code_tests(reference, where); see evalsuite/tasks/adapters.py",
    )
    options: dict[str, Any] = Field(default_factory=dict, description="passed to the adapter; part of the identity")


class PromptSpec(BaseModel):
    """Jinja templates over a dataset row (the row's fields are the variables)."""

    model_config = ConfigDict(extra="forbid")
    system: str | None = None
    user: str


class GraderSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    extraction: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)


class TaskSpec(BaseModel):
    """One task: dataset, prompt, reference, strata, grader and generation overrides."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    dataset: DataSources
    id_field: str | None = Field(None, description="row field with a stable id; default: the row index")
    id_prefix: str = ""
    reference_field: str
    strata: list[str] = Field(default_factory=list)
    prompt: PromptSpec
    grader: GraderSpec
    generation: dict[str, Any] = Field(default_factory=dict)
    equivalence_margin: float = Field(
        0.02, gt=0, lt=1, description="TOST margin (a proportion) declared before any run: 0.02 = 2 points"
    )
    metadata_fields: list[str] = Field(default_factory=list)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    if path in seen:
        raise ConfigError(f"{path}: 'include' forms a cycle through {' -> '.join(map(str, seen))}.")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"Task spec {path} does not exist.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a task spec must be a mapping of keys, got {type(raw).__name__}.")
    include = raw.pop("include", None)
    if include is None:
        return raw
    base = _read_yaml((path.parent / include).resolve(), seen + (path,))
    return _deep_merge(base, raw)


def load_task_spec(path: str | Path) -> TaskSpec:
    """Read and validate one task spec, resolving `include:`."""
    path = Path(path).resolve()
    raw = _read_yaml(path)
    raw.setdefault("name", path.stem)
    try:
        return TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(path))) from None


def find_task(name: str, tasks_dir: Path) -> TaskSpec:
    """Look a task up by name (its file stem) in the tasks folder."""
    path = tasks_dir / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in tasks_dir.glob("*.yaml"))
        raise ConfigError(f"Unknown task '{name}'. Tasks in {tasks_dir}: {', '.join(known) or 'none'}.")
    return load_task_spec(path)
