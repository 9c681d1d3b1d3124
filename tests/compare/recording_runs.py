"""Real llama-server recordings (../shared/data/recordings) as in-memory runs for compare tests."""

from __future__ import annotations

import gzip
import json
from functools import cache
from typing import Any

import pytest
from projects import recordings_dir

from evalsuite.engines.parse import completion_from_chat
from evalsuite.records import SampleResult
from evalsuite.store import MemoryRun

needs_recordings = pytest.mark.skipif(
    not (recordings_dir() / "base_f16.json.gz").exists(), reason=f"recordings not found under {recordings_dir()}"
)


@cache
def _load(name: str) -> dict[str, Any]:
    with gzip.open(recordings_dir() / f"{name}.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


@cache
def recording_run(name: str, pass_: int = 0) -> MemoryRun:
    """One pass of one recording file as a run of the 'gsm8k-first-24' task."""
    data = _load(name)
    results: dict[str, SampleResult] = {}
    request: dict[str, Any] = {}
    model = ""
    for entry in data["responses"]:
        if entry["pass"] != pass_:
            continue
        request = entry["request"]
        model = entry["response"].get("model", "")
        sid = f"gsm8k-test-{entry['index']}"
        results[sid] = SampleResult(sid, "gsm8k", {}, completion_from_chat(entry["response"]))
    meta = next((m.get("meta") for m in data["models"].get("data", []) if m.get("meta")), None)
    params = {k: v for k, v in request.items() if k != "messages"}
    fields = {
        "task": "gsm8k",
        "prompt_template": "raw-question",
        "params": params,
        "dataset": {"name": "gsm8k", "split": "test", "rows": "0-23"},
        "server": {"model": model, "model_meta": meta, "args": data["args"]},
        "target": data["config"],
    }
    manifest = {
        "fingerprint": f"{data['config']}-{pass_}",
        "fingerprint_fields": fields,
        "target": data["config"],
        "task": "gsm8k",
    }
    return MemoryRun(manifest, results)
