"""lm-eval's documents and prompts as the suite's samples (the dataset adapter of lm-eval task specs).

`tasks/data.py` calls this module like any dataset adapter: `load_hf` when
the run uses the hub (lm-eval loads its own dataset), `prepare_rows` with the
rows of a local file or fixture (fed to lm-eval as the task's test split),
then `build_samples` turns the prepared rows into Samples.  Either way lm-eval
builds every prompt itself (`Task.build_all_requests`), few-shot examples and
chat messages included, exactly as its API clients would send them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalsuite.errors import ConfigError, DatasetError
from evalsuite.lmeval.select import Leaf, LMEvalOptions, leaves
from evalsuite.records import Sample
from evalsuite.tasks.data import read_local
from evalsuite.tasks.schema import TaskSpec

FEWSHOT_SEED = 1234
"""lm-eval's default `fewshot_random_seed` (simple_evaluate), so few-shot examples match its own runs."""


def _chat_json(history: list[dict[str, Any]], add_generation_prompt: bool = True) -> Any:
    """lm-eval's API models' chat "template": the messages themselves, as JSON (TemplateAPI, untokenized)."""
    from lm_eval.models.api_models import JsonChatStr

    return JsonChatStr(json.dumps(history, ensure_ascii=False))


def _fewshot_source(config: dict[str, Any]) -> str | None:
    """The split a leaf draws few-shot examples from, or None when it needs none (or lists them itself)."""
    fewshot = config.get("fewshot_config") or {}
    if not int(config.get("num_fewshot") or 0) or fewshot.get("samples") is not None:
        return None
    return (
        fewshot.get("split")
        or config.get("fewshot_split")
        or config.get("training_split")
        or config.get("validation_split")
    )


def with_local_rows(leaf: Leaf, rows: list[dict[str, Any]], splits: dict[str, str]) -> dict[str, Any]:
    """A leaf's config reading `rows` as its test split (and `splits` files by name) instead of the hub."""
    import datasets

    tables: dict[str, list[dict[str, Any]]] = {"test": rows}
    for split, path in splits.items():
        tables[split] = read_local(Path(path))
    config = dict(leaf.config)
    test_name = config.get("test_split") or config.get("validation_split")
    needed = _fewshot_source(config)
    if needed is not None and needed not in tables and needed != test_name:
        raise ConfigError(
            f"lm-eval task '{leaf.name}' draws {config['num_fewshot']} few-shot examples from its '{needed}' split, "
            f"which a local file does not provide: give that split's file in lmeval.splits ({needed}: FILE) "
            "or set lmeval.num_fewshot: 0."
        )
    for key in ("training_split", "validation_split", "fewshot_split"):
        if config.get(key) is not None and config[key] not in tables:
            config[key] = "test" if config[key] == test_name else None
    fewshot = dict(config.get("fewshot_config") or {})
    if fewshot.get("split") is not None and fewshot["split"] not in tables:
        fewshot["split"] = "test"
        config["fewshot_config"] = fewshot
    config["test_split"] = "test"

    def load(**_: Any) -> Any:
        return datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in tables.items()})

    config["custom_dataset"] = load
    return config


def make_task(config: dict[str, Any], name: str) -> Any:
    """lm-eval's ConfigurableTask for a leaf config; its own errors become one sentence naming the task."""
    import logging

    from lm_eval.api.task import ConfigurableTask

    task_log = logging.getLogger("lm_eval.api.task")
    level = task_log.level
    task_log.setLevel(logging.ERROR)  # its advice on --metadata for custom datasets does not apply here
    try:
        task = ConfigurableTask(config=config)
    except (KeyError, ValueError, TypeError, FileNotFoundError, ConnectionError) as exc:
        raise DatasetError(f"lm-eval could not load task '{name}': {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # the hub raises many types; the user needs one sentence
        raise DatasetError(
            f"lm-eval could not load task '{name}' ({type(exc).__name__}: {exc}). Offline? "
            "Use --data local --data-path FILE or --data fixture."
        ) from None
    finally:
        task_log.setLevel(level)
    task.set_fewshot_seed(seed=FEWSHOT_SEED)
    return task


def _clean(doc: Any) -> Any:
    """The doc as the run store will give it back (JSON), so grading sees what the prompt saw."""
    return json.loads(json.dumps(doc, default=str, ensure_ascii=False))


def _messages(ctx: Any, chat: bool, name: str) -> list[dict[str, str]]:
    if not chat:
        return [{"role": "user", "content": str(ctx)}]
    messages = json.loads(ctx.prompt)
    if any(not isinstance(m.get("content"), str) for m in messages):
        raise ConfigError(
            f"lm-eval task '{name}' sends non-text message content (images?); only text tasks are supported."
        )
    return [{"role": str(m["role"]), "content": m["content"]} for m in messages]


def requests_of(task: Any, leaf: Leaf, options: LMEvalOptions) -> list[dict[str, Any]]:
    """One prepared row per document: lm-eval's prompt (as chat messages or one text), doc and strata."""
    chat = options.apply_chat_template
    task.build_all_requests(
        apply_chat_template=chat,
        fewshot_as_multiturn=options.fewshot_as_multiturn,
        system_instruction=options.system_instruction,
        chat_template=_chat_json if chat else None,
    )
    out = []
    for inst in task.instances:
        out.append(
            {
                "id": f"{leaf.name}/{inst.doc_id}",
                "doc_id": inst.doc_id,
                "doc": _clean(inst.doc),
                "messages": _messages(inst.args[0], chat, leaf.name),
                "lmeval_task": leaf.name,
                "lmeval_group": leaf.group,
            }
        )
    return out


def _options(raw: dict[str, Any]) -> LMEvalOptions:
    return LMEvalOptions.model_validate(raw)


def prepare_rows(rows: list[dict[str, Any]], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of a local file or fixture, given to every leaf task as its test split, then lm-eval's prompts."""
    opts = _options(options)
    if not rows:
        raise DatasetError(f"lm-eval task '{opts.task}': the local data has no rows.")
    out: list[dict[str, Any]] = []
    for leaf in leaves(opts, Path.cwd()):
        config = with_local_rows(leaf, rows, opts.splits)
        out.extend(requests_of(make_task(config, leaf.name), leaf, opts))
    return out


def load_hf(path: str, revision: str, options: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """lm-eval loads each leaf's own dataset (hub or local cache) and builds the prompts."""
    opts = _options(options)
    out: list[dict[str, Any]] = []
    for leaf in leaves(opts, Path.cwd()):
        out.extend(requests_of(make_task(dict(leaf.config), leaf.name), leaf, opts))
    return out, f"lm-eval:{opts.task}"


def build_samples(spec: TaskSpec, rows: list[dict[str, Any]], *, source: str = "dataset") -> list[Sample]:
    """Samples from prepared rows: lm-eval's messages as they are (never re-rendered or stripped)."""
    samples = []
    for row in rows:
        samples.append(
            Sample(
                id=spec.id_prefix + str(row["id"]),
                task=spec.name,
                messages=tuple(row["messages"]),
                reference=row["doc"],
                strata={"lmeval_task": row["lmeval_task"], "lmeval_group": row["lmeval_group"]},
                metadata={"doc_id": row["doc_id"]},
            )
        )
    return samples
