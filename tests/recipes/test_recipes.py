"""The recipes in recipes/ load as configs, each a baseline, a control and a speculative target, and their
SGLang flags are SGLang's own (its published argument list: SGLang imports torch and triton, so its parser
cannot run here; the llama.cpp and vLLM flags are checked by their own parsers in tests/rig)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from recipe_files import RECIPES, commands, load

from evalsuite.cli import main

HERE = Path(__file__).parent
SGLANG_VERSION = "0.5.23"
SGLANG_FLAGS = set((HERE / f"sglang-{SGLANG_VERSION}-flags.txt").read_text().split())
"""Every server flag of sglang==0.5.23, read from its wheel by `extract_sglang_flags.py`."""
SGLANG_ALGORITHMS = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO"}
"""`--speculative-algorithm` builtins of sglang 0.5.23 (`SpeculativeAlgorithm`, NEXTN an alias of EAGLE)."""
METHODS = {"draft", "eagle3", "mtp", "dflash", "ngram"}


def test_every_engine_has_a_recipe_for_every_method() -> None:
    names = {p.stem for p in RECIPES}
    assert names == {f"{engine}-{method}" for engine in ("llamacpp", "vllm", "sglang") for method in METHODS}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_a_recipe_loads_with_evalsuite_targets(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets", "--config", str(path)]) == 0
    config = load(path)
    [speculative] = [t for t in config.targets.values() if t.control is not None]
    assert speculative.name.endswith(path.stem.split("-", 1)[1])  # qwen3-eagle3 in vllm-eagle3.toml
    baseline, control = config.targets[speculative.baseline or ""], config.targets[speculative.control]
    assert control.baseline == baseline.name and baseline.baseline is None
    assert {t.engine for t in config.targets.values()} == {path.stem.split("-", 1)[0]}
    assert speculative.name in capsys.readouterr().out


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_the_three_servers_differ_only_in_their_speculation(path: Path) -> None:
    """The baseline's command is where the control's and the candidate's start: same model, same settings."""
    served = [c for c in commands() if c.recipe == path.name]
    base = next(c.argv for c in served if load(path).targets[c.target].baseline is None)
    for command in served:
        assert command.argv[: len(base)] == base, command.target


@pytest.mark.parametrize("command", commands("sglang"), ids=lambda c: f"{c.recipe}:{c.target}")
def test_sglang_recipes_use_flags_sglang_has(command: object) -> None:
    from recipe_files import Command

    assert isinstance(command, Command)
    assert command.argv[:3] == ["python", "-m", "sglang.launch_server"]
    unknown = [f for f in command.flags if f not in SGLANG_FLAGS]
    assert not unknown, f"not a flag of sglang {SGLANG_VERSION}: {unknown}"
    algorithm = command.value("--speculative-algorithm")
    assert algorithm is None or algorithm in SGLANG_ALGORITHMS
    for deterministic in ("--random-seed", "--disable-radix-cache", "--max-running-requests"):
        assert deterministic in command.flags


def test_the_flag_list_is_sglangs() -> None:
    """A sample of flags every SGLang server takes, and none that it does not."""
    assert {"--model-path", "--port", "--speculative-draft-model-path", "--enable-deterministic-inference"} <= (
        SGLANG_FLAGS
    )
    assert "--speculative-config" not in SGLANG_FLAGS and len(SGLANG_FLAGS) > 400


def test_the_extractor_reads_flags_the_way_sglang_builds_them(tmp_path: Path) -> None:
    from extract_sglang_flags import flags

    fields = tmp_path / "sglang" / "srt" / "arg_groups" / "fields"
    fields.mkdir(parents=True)
    (fields / "spec.py").write_text(
        "class Spec:\n"
        '    speculative_algorithm: A[Optional[str], "help"] = None\n'
        '    draft: A[Optional[str], Arg(help="h", aliases=["--speculative-draft-model"])] = None\n'
        "    hidden: A[str, Arg(no_cli=True)] = 'x'\n"
        '    tp_size: A[int, Arg(help="h", cli_name="--tensor-parallel-size")] = 1\n'
    )
    (tmp_path / "sglang" / "srt" / "server_args.py").write_text('parser.add_argument("--config", type=str)\n')
    assert ast.parse((fields / "spec.py").read_text())
    assert flags(tmp_path) == {
        "--speculative-algorithm",
        "--draft",
        "--speculative-draft-model",
        "--tensor-parallel-size",
        "--config",
    }
