"""The recipes' engine flags checked by the engines themselves: the pinned llama-server's `--help` and the
pinned vLLM's server parser and speculative-config validation.  A flag renamed upstream then fails here, not
for a user.  Cheap: no server starts (the vLLM check is one process that imports vLLM, about 20 s).
SGLang's flags are checked against its published list in tests/recipes (its parser needs CUDA)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from recipe_files import Command, commands

pytestmark = pytest.mark.rig

HERE = Path(__file__).parent
DESCRIPTION = 40
"""The column where `--help` starts an option's description; flags too long for it fill the whole line."""
FLAG = re.compile(r"(?<![\w-])(-{1,2}[A-Za-z][\w-]*)")


def _help_flags(text: str) -> tuple[set[str], set[str]]:
    """The flags `llama-server --help` lists (the first column of each option line) and the --spec-type names."""
    flags: set[str] = set()
    spec_types: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("-"):
            continue
        head = line[:DESCRIPTION] if line[DESCRIPTION - 2 : DESCRIPTION] == "  " else line  # long ones run over
        flags.update(FLAG.findall(head))
        if head.startswith("--spec-type "):
            spec_types.update(head.split()[1].split(","))
    return flags, spec_types


@pytest.fixture(scope="module")
def llama_help() -> tuple[set[str], set[str]]:
    from evalsuite.rig.build import ensure_llama_server

    binary = ensure_llama_server(progress=lambda msg: print(f"[rig] {msg}", flush=True))
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    return _help_flags(done.stdout + done.stderr)


def test_the_help_reader_finds_flags_and_their_aliases(llama_help: tuple[set[str], set[str]]) -> None:
    flags, spec_types = llama_help
    assert {"-m", "--model", "-md", "--spec-draft-model", "--parallel", "-np", "--port"} <= flags
    assert {"draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "ngram-simple"} <= spec_types
    assert "--spec-draft-nmax" not in flags and "draft-medusa" not in spec_types


@pytest.mark.parametrize("command", commands("llamacpp"), ids=lambda c: f"{c.recipe}:{c.target}")
def test_llamacpp_recipes_use_flags_the_pinned_llama_server_has(
    command: Command, llama_help: tuple[set[str], set[str]]
) -> None:
    flags, spec_types = llama_help
    assert command.program == ["llama-server"]
    unknown = [f for f in command.flags if f not in flags]
    assert not unknown, f"not a flag of the pinned llama-server: {unknown}"
    kind = command.value("--spec-type")
    assert kind is None or set(kind.split(",")) <= spec_types


STAND_INS = {
    "Qwen/Qwen3-8B": "smollm2",
    "XiaomiMiMo/MiMo-7B-RL": "smollm2",
    "Qwen/Qwen3-0.6B": "smollm2-first8",
    "RedHatAI/Qwen3-8B-speculator.eagle3": "smollm2-first8",
    "z-lab/Qwen3-8B-DFlash-b16": "smollm2-dflash",
}
"""Each model the vLLM recipes name, by the rig model folder that stands in for it in validation."""


@pytest.fixture(scope="module")
def vllm_results() -> dict[str, str]:
    from evalsuite.rig.vllm.env import ensure_vllm_env
    from evalsuite.rig.vllm.models import ensure_vllm_models

    say = lambda msg: print(f"[rig] {msg}", flush=True)  # noqa: E731
    python, folders = ensure_vllm_env(say), ensure_vllm_models(say)
    stand_ins = {name: str(folders[role]) for name, role in STAND_INS.items() if role in folders}
    items = [
        {"id": f"{c.recipe}:{c.target}", "args": _ported(c.args), "stand_ins": stand_ins} for c in commands("vllm")
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    done = subprocess.run(
        [str(python), str(HERE / "vllm_recipe_check.py")],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("command", commands("vllm"), ids=lambda c: f"{c.recipe}:{c.target}")
def test_vllm_recipes_pass_vllms_parser_and_speculative_validation(
    command: Command, vllm_results: dict[str, str]
) -> None:
    assert command.program == ["vllm", "serve"]
    assert vllm_results[f"{command.recipe}:{command.target}"] == "ok"


def test_every_vllm_method_is_covered() -> None:
    methods = {(c.speculative_config() or {}).get("method") for c in commands("vllm")}
    assert methods == {None, "draft_model", "eagle3", "mtp", "dflash", "ngram"}


def _ported(args: list[str]) -> list[str]:
    """The arguments with a port where the suite puts one (`{port}` is not a number to vLLM's parser)."""
    return [a.replace("{port}", "8000") for a in args]
