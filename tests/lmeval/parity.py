"""Both sides of the lm-eval parity check, on one endpoint and the same local documents.

lm-eval side: lm-eval's own `simple_evaluate` with its `local-completions` /
`local-chat-completions` clients, greedy, over a task YAML of its own that
reads the local file with `data_files` (lm-eval's own loading, not the
adapter's); `cache_prompt: false` is passed as a generation kwarg, as the
suite sends it.  Suite side: a run through `plan_run`/`execute`/`grade_run`
of the adapter's task on the same file.  Each gives, per document: the
prompt, the response, every filter's answer and every score.
Shared by tests/lmeval/test_parity_rig.py and bench/lmeval.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from evalsuite.config import load_config
from evalsuite.grading import grade_run
from evalsuite.runner import execute, plan_run
from evalsuite.store import open_run

Side = dict[int, dict[str, Any]]


def lmeval_task_dir(folder: Path, name: str, base: str, data: Path) -> Path:
    """Adds to an lm-eval include_path folder task `name`: lm-eval's `base` task reading `data` as every split."""
    import lm_eval

    folder.mkdir(parents=True, exist_ok=True)
    family = {"gsm8k": "gsm8k", "hendrycks_math_algebra": "hendrycks_math"}[base]
    base_yaml = Path(lm_eval.__file__).parent / "tasks" / family / f"{base}.yaml"
    files = {"test": str(data), "train": str(data)}
    text = (
        f"include: {base_yaml}\ntask: {name}\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs: {{data_files: {json.dumps(files)}}}\nnum_fewshot: 0\n"
    )
    (folder / f"{name}.yaml").write_text(text)
    return folder


def lmeval_side(
    base_url: str, model: str, task_dir: Path, task: str, *, chat: bool, limit: int, max_gen_toks: int
) -> Side:
    """lm-eval's own evaluation, with per-sample logs, as {doc_id: {prompt, response, filtered, scores}}.

    The TaskManager over `task_dir` is lm-eval's own class; it is taken from the adapter's per-process
    cache only so that its index (tens of seconds) is built once per test session.
    """
    import lm_eval

    from evalsuite.lmeval.select import task_manager

    route = "chat/completions" if chat else "completions"
    results = lm_eval.simple_evaluate(
        model="local-chat-completions" if chat else "local-completions",
        model_args={
            "base_url": f"{base_url}/v1/{route}",
            "model": model,
            "tokenizer_backend": None,
            "tokenized_requests": False,
            "max_gen_toks": max_gen_toks,
            "seed": 42,
            "max_retries": 1,
        },
        tasks=[task],
        task_manager=task_manager(str(task_dir)),
        apply_chat_template=chat,
        gen_kwargs={"cache_prompt": False},
        limit=limit,
        log_samples=True,
        bootstrap_iters=0,
    )
    out: Side = {}
    for entry in results["samples"][task]:
        doc = out.setdefault(entry["doc_id"], {"filtered": {}, "scores": {}})
        ctx = entry["arguments"][0][0]
        doc["prompt"] = json.loads(ctx.prompt) if chat else [{"role": "user", "content": ctx}]
        doc["response"] = entry["resps"][0][0]
        doc["filtered"][entry["filter"]] = entry["filtered_resps"][0]
        doc["scores"][entry["filter"]] = {m: float(entry[m]) for m in entry["metrics"]}
    return out


def suite_project(folder: Path, base_url: str, task_files: dict[str, str]) -> Path:
    """A project with one chat and one completions target at base_url and the given lm-eval task files."""
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    for name, text in task_files.items():
        (folder / "tasks" / f"{name}.yaml").write_text(text)
    config = folder / "evalsuite.toml"
    targets = "".join(
        f'[targets.{api}]\nbase_url = "{base_url}/v1"\nengine = "llamacpp"\napi = "{api}"\n\n'
        for api in ("chat", "completions")
    )
    config.write_text(f'[defaults]\ndata = "local"\n\n{targets}')
    return config


def suite_side(config_path: Path, target: str, task: str, data: Path, *, limit: int) -> Side:
    """The adapter's run of the same documents, graded by lm-eval's scoring through the suite."""
    plan = plan_run(load_config(config_path), target, task, data="local", data_path=str(data), limit=limit)
    outcome = asyncio.run(execute(plan))
    store = open_run(outcome.folder)
    grades = {g.sample_id: g for g in grade_run(store, tasks_dir=config_path.parent / "tasks")}
    samples = store.samples()
    out: Side = {}
    for sample_id, result in store.results().items():
        sample = samples[sample_id]
        scored = grades[sample_id].details["lmeval"]
        out[int(sample.metadata["doc_id"])] = {
            "prompt": [dict(m) for m in sample.messages],
            "response": result.completion.text,
            "filtered": {name: s["filtered"] for name, s in scored.items()},
            "scores": {name: {k: float(v) for k, v in s.items() if k != "filtered"} for name, s in scored.items()},
        }
    return out


def differences(theirs: Side, ours: Side) -> list[str]:
    """Every per-document difference, naming the document, the field and both values."""
    problems = []
    if sorted(theirs) != sorted(ours):
        problems.append(f"documents differ: lm-eval {sorted(theirs)} vs suite {sorted(ours)}")
    for doc_id in sorted(set(theirs) & set(ours)):
        for key in ("prompt", "response", "filtered", "scores"):
            if theirs[doc_id][key] != ours[doc_id][key]:
                problems.append(f"doc {doc_id} {key}: lm-eval {theirs[doc_id][key]!r} vs suite {ours[doc_id][key]!r}")
    return problems
