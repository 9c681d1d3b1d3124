"""Which lm-eval tasks a suite task means, and their configurations.

A suite task names one lm-eval task, group or tag (`lmeval: gsm8k` in a task
file, or `--task lmeval:minerva_math_algebra`).  This module resolves it to
its leaf tasks' full configurations (YAML includes and `!function`s
resolved) without loading any data, so the suite can check the selection
(only `generate_until` tasks carry a token diff), fix the generation settings
and hash the configuration before a single request is sent.

It uses lm-eval's task index and its config loader; both are lm-eval 0.4.13
internals (`TaskManager._factory`), which is why the extra pins that release.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evalsuite.errors import ConfigError, format_validation_error
from evalsuite.lmeval import require

DEFAULT_MAX_GEN_TOKS = 256
"""lm-eval's API models' default `max_gen_toks` when a task sets none."""


class LMEvalOptions(BaseModel):
    """The `lmeval:` block of a task file (or `--task lmeval:NAME` with every default)."""

    model_config = ConfigDict(extra="forbid")
    task: str = Field(description="an lm-eval task, group or tag name")
    num_fewshot: int | None = Field(None, ge=0, description="override the task's few-shot count")
    apply_chat_template: bool = Field(
        True,
        description="chat messages, as lm-eval's local-chat-completions with --apply_chat_template; "
        "false: one flat prompt, as local-completions (use it with api = 'completions' targets)",
    )
    fewshot_as_multiturn: bool = False
    system_instruction: str | None = None
    max_gen_toks: int | None = Field(None, gt=0, description="override the task's generation length")
    overrides: dict[str, Any] = Field(default_factory=dict, description="lm-eval TaskConfig keys for every leaf")
    splits: dict[str, str] = Field(
        default_factory=dict, description="extra local files by split name (e.g. train: FILE for few-shot examples)"
    )
    include_path: str | None = Field(None, description="a folder of your own lm-eval task YAML files")
    fixture: str | None = None
    local: str | None = None

    @field_validator("task")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name an lm-eval task, group or tag")
        return value.strip()


def parse_options(raw: Any, where: str) -> LMEvalOptions:
    """The `lmeval:` value of a task file: a task name or a mapping of options."""
    if isinstance(raw, str):
        raw = {"task": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'lmeval' must be a task name or a mapping with 'task', got {raw!r}.")
    try:
        return LMEvalOptions.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, f"{where}: lmeval")) from None


@dataclass(frozen=True)
class Leaf:
    """One lm-eval task to run: its name, the group (or tag) it came through, and its full config."""

    name: str
    group: str
    config: dict[str, Any]


@lru_cache(maxsize=4)
def task_manager(include_path: str | None = None) -> Any:
    """lm-eval's task index (a few seconds to build, so one per process and include path)."""
    require()
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=include_path)


def leaves(options: LMEvalOptions, root: Path) -> list[Leaf]:
    """The leaf tasks a selection expands to, with its overrides applied, in lm-eval's order."""
    include = str((root / options.include_path).resolve()) if options.include_path else None
    manager = task_manager(include)
    index = manager.task_index
    if options.task not in index:
        close = sorted(n for n in index if options.task.lower() in n.lower())[:8]
        hint = f" Similar names: {', '.join(close)}." if close else ""
        raise ConfigError(f"lm-eval has no task, group or tag named '{options.task}'.{hint}")
    overrides = dict(options.overrides)
    if options.num_fewshot is not None:
        overrides["num_fewshot"] = options.num_fewshot
    out: list[Leaf] = []
    try:
        _expand(manager, options.task, overrides, options.task, out, ())
    except ConfigError:
        raise
    except Exception as exc:  # a task's own module failed to import (a missing lm-eval extra, mostly)
        raise ConfigError(f"lm-eval could not read task '{options.task}': {type(exc).__name__}: {exc}") from None
    if not out:
        raise ConfigError(f"lm-eval's '{options.task}' contains no tasks.")
    return out


def _expand(manager: Any, name: str, overrides: dict[str, Any], group: str, out: list[Leaf], seen: tuple) -> None:
    from lm_eval.tasks._factory import GROUP_FIELD_NAMES
    from lm_eval.tasks._index import Kind

    if name in seen:
        raise ConfigError(f"lm-eval group '{name}' contains itself.")
    entry = manager.task_index[name]
    factory = manager._factory  # noqa: SLF001 - lm-eval's own config loader (includes, !function)
    if entry.kind == Kind.TAG:
        for member in sorted(entry.tags):
            if member in manager.task_index:
                _expand(manager, member, overrides, name, out, seen + (name,))
        return
    if entry.kind != Kind.GROUP:
        config = factory._load_full_config(entry, overrides)  # noqa: SLF001
        for key in ("tag", "group", "task_list"):
            config.pop(key, None)
        out.append(Leaf(str(config["task"]), group, config))
        return
    raw = factory._load_full_config(entry, None)  # noqa: SLF001
    merged = {**{k: v for k, v in raw.items() if k not in GROUP_FIELD_NAMES}, **overrides}
    for item in raw.get("task") or []:
        if isinstance(item, str):
            _expand(manager, item, merged, name, out, seen + (name,))
        elif isinstance(item, dict) and isinstance(item.get("task"), str) and item["task"] in manager.task_index:
            _expand(manager, item["task"], {**merged, **item}, name, out, seen + (name,))
        else:
            raise ConfigError(
                f"lm-eval group '{name}' defines a member inline ({item!r}); "
                "name its tasks one by one or put them in an include_path folder."
            )


def _stable(value: Any) -> Any:
    """JSON-able form of a config value: functions by their qualified name, never by address."""
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}"
    return str(value)


def config_hash(config: dict[str, Any]) -> str:
    """sha256 (16 digits) of a leaf's configuration, data loader left out (the data has its own identity)."""
    clean = {k: v for k, v in config.items() if k != "custom_dataset"}
    meta = dict(clean.get("metadata") or {})
    meta.pop("config_source", None)  # the install path, not the task
    clean["metadata"] = meta
    text = json.dumps(clean, sort_keys=True, default=_stable, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def generation_of(leaf: Leaf) -> dict[str, Any]:
    """A leaf's generation settings after lm-eval's own defaults; refuses what has no token diff."""
    from lm_eval.config.task import TaskConfig

    config = leaf.config
    if "class" in config:
        raise ConfigError(
            f"lm-eval task '{leaf.name}' is a Python class task; only YAML tasks can be run through the suite."
        )
    output_type = config.get("output_type", "generate_until")
    if output_type != "generate_until":
        raise ConfigError(
            f"lm-eval task '{leaf.name}' is a {output_type} task: only generate_until tasks produce text, so only "
            "they carry a token diff. Run loglikelihood and multiple-choice tasks with lm-eval itself."
        )
    if int(config.get("repeats") or 1) != 1:
        raise ConfigError(
            f"lm-eval task '{leaf.name}' asks for {config['repeats']} repeats; the suite decodes once, greedily."
        )
    known = {k: v for k, v in config.items() if k in TaskConfig.__dataclass_fields__}
    gen = dict(TaskConfig(**known).generation_kwargs or {})
    if gen.get("do_sample") or float(gen.get("temperature") or 0.0) > 0.0:
        raise ConfigError(
            f"lm-eval task '{leaf.name}' samples (do_sample/temperature > 0); the token diff needs greedy decoding. "
            "Override generation_kwargs in lmeval.overrides to run it greedily."
        )
    return gen
