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
from pydantic import ValidationError

from evalsuite.errors import ConfigError, format_validation_error, reading
from evalsuite.tasks.packaged import packaged_tasks
from evalsuite.tasks.schema import TaskSpec


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
    if not path.exists():
        raise ConfigError(f"Task spec {path} does not exist.")
    with reading(path):
        text = path.read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a task spec must be a mapping of keys, got {type(raw).__name__}.")
    include = raw.pop("include", None)
    if include is None:
        return raw
    if not isinstance(include, str) or not include.strip():
        raise ConfigError(
            f"{path}: include = {include!r} must be the file name of another task spec, e.g. include: math500.yaml."
        )
    target = (path.parent / include).resolve()
    if target.is_dir():
        raise ConfigError(f"{path}: include = {include!r} is a folder ({target}), not a task spec file.")
    if not target.exists() and Path(include).name == include and (packaged_tasks() / include).is_file():
        target = (packaged_tasks() / include).resolve()  # a project's variant of a built-in task
    if not target.exists():
        raise ConfigError(f"{path}: include = {include!r} names no file ({target} does not exist).")
    base = _read_yaml(target, seen + (path,))
    return _deep_merge(base, raw)


def load_task_spec(path: str | Path) -> TaskSpec:
    """Read and validate one task spec, resolving `include:`."""
    path = Path(path).resolve()
    raw = _read_yaml(path)
    raw.setdefault("name", path.stem)
    if "lmeval" in raw:
        return _lmeval_spec(raw, path)
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(path))) from None
    _check_spec(spec, path)
    return spec


def _check_spec(spec: TaskSpec, path: Path) -> None:
    """What the schema alone cannot see, checked at load so no run starts with a spec that fails later.

    Out-of-range or unknown generation keys would be sent to the server; an
    unknown grader, extraction step or grader option would surface only
    after every sample had been generated.
    """
    from evalsuite.config import check_generation
    from evalsuite.graders import get_grader

    try:
        get_grader(spec.grader)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None

    stop = spec.generation.get("stop")
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise ConfigError(f"{path}: generation.stop = {stop!r} must be a list of strings.")
    check_generation({k: v for k, v in spec.generation.items() if k != "stop"}, f"{path}: generation")


LMEVAL_PREFIX = "lmeval:"


def _lmeval_spec(raw: dict[str, Any], path: Path) -> TaskSpec:
    """A task file with an `lmeval:` key: lm-eval builds prompts and scores (evalsuite/lmeval/)."""
    from evalsuite.lmeval.select import parse_options
    from evalsuite.lmeval.taskspec import lmeval_task_spec

    unknown = sorted(set(raw) - {"lmeval", "name", "description", "equivalence_margin"})
    if unknown:
        raise ConfigError(
            f"{path}: an lm-eval task file takes name, description, equivalence_margin and lmeval; "
            f"not {', '.join(unknown)}."
        )
    options = parse_options(raw["lmeval"], str(path))
    margin = raw.get("equivalence_margin", 0.02)
    if not isinstance(margin, (int, float)) or not 0 < margin < 1:
        raise ConfigError(f"{path}: equivalence_margin must be a proportion between 0 and 1, got {margin!r}.")
    return lmeval_task_spec(
        str(raw["name"]), options, path.parent.parent, description=str(raw.get("description", "")), margin=float(margin)
    )


def is_task_path(name: str) -> bool:
    """Whether a `--task` value names a spec file (a .yaml path) rather than a task by name."""
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def locate_task(name: str, tasks_dir: Path | None = None) -> Path | None:
    """The spec file for a task, or None.

    The lookup order: an explicit path (`--task my/spec.yaml`, relative to
    the current folder); then `NAME.yaml` in the project's own tasks folder
    (`tasks/` next to its config), which adds tasks and overrides built-in
    ones; then the tasks packaged with evalsuite.
    """
    if is_task_path(name):
        path = Path(name).expanduser()
        return path if path.is_file() else None
    for folder in (tasks_dir, packaged_tasks()):
        if folder is not None and (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    return None


def known_tasks(tasks_dir: Path | None = None) -> list[str]:
    """Every task name the lookup can find: the project's own and the packaged ones."""
    folders = [f for f in (tasks_dir, packaged_tasks()) if f is not None and f.is_dir()]
    return sorted({p.stem for folder in folders for p in folder.glob("*.yaml")})


def find_task(name: str, tasks_dir: Path | None = None) -> TaskSpec:
    """Load a task by name, by spec path, or `lmeval:NAME` for any lm-eval task (lookup: `locate_task`)."""
    if name.startswith(LMEVAL_PREFIX):
        folder = tasks_dir if tasks_dir is not None else Path.cwd() / "tasks"
        return _lmeval_spec({"name": name, "lmeval": name[len(LMEVAL_PREFIX) :]}, folder / f"{name}.yaml")
    path = locate_task(name, tasks_dir)
    if path is not None:
        return load_task_spec(path)
    if is_task_path(name):
        given = Path(name).expanduser()
        what = "is a folder, not a task spec file" if given.is_dir() else "does not exist"
        hint = f" (a task by name is given without .yaml: --task {given.stem})" if given.name == name else ""
        raise ConfigError(f"Task spec file {name} {what}{hint}.")
    where = f"{tasks_dir} or the packaged tasks" if tasks_dir is not None else "the packaged tasks"
    raise ConfigError(
        f"Unknown task '{name}': no {name}.yaml in {where}. Known tasks: {', '.join(known_tasks(tasks_dir)) or 'none'}."
    )
