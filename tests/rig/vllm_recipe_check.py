"""Run by the pinned vLLM's own Python: parse recipe command lines with vLLM's server parser and build each
speculative config through vLLM's validation.  Reads a JSON list of {"id", "args", "stand_ins"} on stdin and
prints {"id": "ok" or the error} as JSON.

The recipes name real models (Qwen3-8B and its drafters), which this machine does not hold; validation needs
a model's config, so each model is stood in for by one of the rig's converted SmolLM2 folders.  MTP needs a
target with an MTP layer, which no rig model has: its config is checked against vLLM's fields and methods only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import sys
import typing
from typing import Any


def check(args: list[str], stand_ins: dict[str, str]) -> str:
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
    from vllm.config.speculative import SpeculativeMethod
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.reasoning import ReasoningParserManager
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(args)
    except SystemExit:
        return "vLLM's parser refused it: " + err.getvalue().strip().splitlines()[-1]
    if parsed.reasoning_parser and parsed.reasoning_parser not in ReasoningParserManager.list_registered():
        return f"no reasoning parser {parsed.reasoning_parser!r}"
    spec: dict[str, Any] | None = parsed.speculative_config
    if spec is None:
        return "ok"
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    if set(spec) - fields:
        return f"not a speculative-config field: {sorted(set(spec) - fields)}"
    methods = set(_flatten(SpeculativeMethod))
    if spec.get("method") not in methods:
        return f"not a speculative method: {spec.get('method')!r}"
    if spec["method"] == "mtp":
        return "ok"
    target = ModelConfig(model=stand_ins[parsed.model_tag], dtype="bfloat16", max_model_len=2048)
    local = {**spec, **({"model": stand_ins[spec["model"]]} if "model" in spec else {})}
    SpeculativeConfig(**local, target_model_config=target, target_parallel_config=ParallelConfig())
    return "ok"


def _flatten(literal: Any) -> list[str]:
    out: list[str] = []
    for arg in typing.get_args(literal):
        out += _flatten(arg) if typing.get_args(arg) else [arg]
    return out


if __name__ == "__main__":
    results = {}
    for item in json.load(sys.stdin):
        try:
            results[item["id"]] = check(item["args"], item["stand_ins"])
        except Exception as exc:  # vLLM's validation errors come in many types
            results[item["id"]] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(results))
