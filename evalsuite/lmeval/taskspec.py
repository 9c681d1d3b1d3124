"""A suite TaskSpec for an lm-eval selection.

The spec carries what the rest of the suite reads from any task: the data
sources (lm-eval's own hub dataset, or a local file / fixture fed to lm-eval),
the generation settings lm-eval would send (`until` as stop sequences,
`max_gen_toks` as max_tokens), strata (lm-eval task and group) and the
grader.  Its prompt "template" is the lm-eval identity (lm-eval's version,
each leaf task's version and config hash, the prompt options), so the run
fingerprint changes whenever lm-eval would build other prompts or scores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalsuite.errors import ConfigError
from evalsuite.lmeval import version
from evalsuite.lmeval.select import DEFAULT_MAX_GEN_TOKS, LMEvalOptions, config_hash, generation_of, leaves
from evalsuite.tasks.schema import DataSources, GraderSpec, HFSource, PromptSpec, TaskSpec

ADAPTER = "evalsuite.lmeval.rows"
STRATA = ["lmeval_task", "lmeval_group"]


def _absolute(options: LMEvalOptions, root: Path) -> LMEvalOptions:
    """Paths in the options resolved against the project root, so the grade stage finds them anywhere."""
    splits = {k: str((root / v).resolve()) for k, v in options.splits.items()}
    include = str((root / options.include_path).resolve()) if options.include_path else None
    return options.model_copy(update={"splits": splits, "include_path": include})


def identity(options: LMEvalOptions, root: Path) -> dict[str, Any]:
    """What pins lm-eval's prompts and scores: its version, each leaf's version and config hash."""
    tasks = {}
    for leaf in leaves(options, root):
        meta = leaf.config.get("metadata") or {}
        tasks[leaf.name] = {"group": leaf.group, "version": meta.get("version"), "config": config_hash(leaf.config)}
    return {
        "lm_eval": version(),
        "tasks": tasks,
        "prompt": {
            "apply_chat_template": options.apply_chat_template,
            "fewshot_as_multiturn": options.fewshot_as_multiturn,
            "system_instruction": options.system_instruction,
        },
    }


def _generation(options: LMEvalOptions, root: Path) -> dict[str, Any]:
    """One set of stop sequences and a length for the whole selection, as lm-eval's API clients send them."""
    settings: dict[str, tuple[tuple[str, ...], int]] = {}
    for leaf in leaves(options, root):
        gen = generation_of(leaf)
        until = gen.get("until") or []
        until = [until] if isinstance(until, str) else list(until)
        if options.apply_chat_template:
            until = until[:4]  # lm-eval's chat client sends at most four
        length = options.max_gen_toks or int(gen.get("max_gen_toks") or gen.get("max_tokens") or DEFAULT_MAX_GEN_TOKS)
        settings[leaf.name] = (tuple(until), length)
    distinct = set(settings.values())
    if len(distinct) > 1:
        shown = "; ".join(f"{name}: until={list(u)}, max_gen_toks={n}" for name, (u, n) in settings.items())
        raise ConfigError(
            f"lm-eval's '{options.task}' mixes generation settings ({shown}); "
            "a run sends one set, so run those tasks separately."
        )
    until, length = distinct.pop()
    return {"stop": list(until), "max_tokens": length}


def lmeval_task_spec(
    name: str, raw_options: LMEvalOptions, root: Path, *, description: str = "", margin: float = 0.02
) -> TaskSpec:
    """The suite's TaskSpec for an lm-eval selection (checks it and reads its configs; loads no data)."""
    options = _absolute(raw_options, root)
    first = leaves(options, root)[0].config
    dataset_kwargs = first.get("dataset_kwargs") or {}
    hf = HFSource(
        path=str(first.get("dataset_path") or "lm-eval"),
        name=first.get("dataset_name"),
        split=str(first.get("test_split") or first.get("validation_split") or "test"),
        revision=str(dataset_kwargs.get("revision") or "lm-eval task default"),
    )
    ident = identity(options, root)
    return TaskSpec(
        name=name,
        description=description or f"lm-eval '{options.task}' through the suite ({ident['lm_eval']}).",
        dataset=DataSources(
            hf=hf, fixture=options.fixture, local=options.local, adapter=ADAPTER, options=options.model_dump()
        ),
        id_field="id",
        reference_field="doc",
        strata=list(STRATA),
        prompt=PromptSpec(user="lm-eval " + json.dumps(ident, sort_keys=True)),
        grader=GraderSpec(name="lmeval", options={"lmeval": options.model_dump(), "identity": ident}),
        generation=_generation(options, root),
        equivalence_margin=margin,
        metadata_fields=["doc_id"],
    )
