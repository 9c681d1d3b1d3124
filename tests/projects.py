"""Helpers shared by test folders and benchmarks: a throwaway project, the shared data folder.

(A module of its own, not conftest.py: several test folders have a conftest,
and `from conftest import ...` would pick whichever was imported last.)
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """../shared/data beside the checkout (override: EVALSUITE_SHARED_DATA)."""
    return Path(os.environ.get("EVALSUITE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def recordings_dir() -> Path:
    """The real llama-server answers recorded on the H200 rig (shared/data/recordings; see its README)."""
    return shared_data_dir() / "recordings" / "llamacpp-cuda-h200"


ECHO_TASK = """\
name: echo
dataset:
  local: data.jsonl
id_field: qid
reference_field: answer
strata: [group]
prompt:
  system: You are terse.
  user: "Question {{ qid }}: {{ question }}"
grader:
  name: gsm8k
  extraction: [hash_line, last_number]
generation:
  max_tokens: 64
"""


def prompt_key(i: int) -> str:
    """The scripted server's key (`FakeState.requests`) for the prompt of sample i of `make_project`'s task."""
    return hashlib.sha256(f"You are terse.\nQuestion q{i:04d}: what is {i}+1?".encode()).hexdigest()[:16]


def checkout_env(*without: str) -> dict[str, str]:
    """This process's environment for a child Python, with this checkout first on its path and `without` unset."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for name in without:
        env.pop(name, None)
    return env


def make_project(folder: Path, base_url: str, *, n: int = 10, target_extra: str = "", defaults_extra: str = "") -> Path:
    """A config + one task over n synthetic rows, pointing at base_url; returns the config path.

    `target_extra` and `defaults_extra` are TOML lines added to the target's and the defaults' tables."""
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    (folder / "tasks" / "echo.yaml").write_text(ECHO_TASK)
    with (folder / "data.jsonl").open("w") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "qid": f"q{i:04d}",
                        "question": f"what is {i}+1?",
                        "answer": f"#### {i + 1}",
                        "group": "even" if i % 2 == 0 else "odd",
                    }
                )
                + "\n"
            )
    config = folder / "evalsuite.toml"
    config.write_text(
        f"""[defaults]
data = "local"
tasks = ["echo"]
{defaults_extra}

[targets.base]
base_url = "{base_url}"
engine = "llamacpp"
{target_extra}

[targets.spec]
base_url = "{base_url}"
engine = "llamacpp"
baseline = "base"
"""
    )
    return config


def copy_project(folder: Path, targets: str, *, tasks: str = '["gsm8k"]') -> Path:
    """A project folder with the real task specs and fixture data and the given targets; returns its config.

    Tests that run real targets write their runs there, never into the checkout's runs/.
    """
    import shutil

    shutil.copytree(ROOT / "tasks", folder / "tasks")
    shutil.copytree(ROOT / "fixtures", folder / "fixtures", ignore=shutil.ignore_patterns("models", "*.py"))
    config = folder / "evalsuite.toml"
    config.write_text(f'[defaults]\ndata = "fixture"\ntasks = {tasks}\n\n{targets}')
    return config


def vllm_target(name: str, base_url: str, extra: str = "") -> str:
    """A config table for a streamed vLLM target at a running server's root URL."""
    return f'[targets.{name}]\nengine = "vllm"\nbase_url = "{base_url}/v1"\nstream = true\n{extra}\n'


def rig_target(
    name: str, *, baseline: str | None = "baseline", control: str | None = "control", extra: str = ""
) -> str:
    """A config table for a reference-rig target."""
    text = f'[targets.{name}]\nengine = "llamacpp"\nrig = "{name}"\n'
    text += f'baseline = "{baseline}"\n' if baseline else ""
    text += f'control = "{control}"\n' if control else ""
    return text + extra + "\n"


def shipped_sampling(target: str) -> str:
    """The shipped config's `[targets.TARGET.sampling]` table as a TOML line for `rig_target(extra=...)`; "" if none."""
    table = tomllib.loads((ROOT / "evalsuite.toml").read_text())["targets"][target].get("sampling")
    return f"sampling = {{ {', '.join(f'{k} = {_toml(v)}' for k, v in table.items())} }}\n" if table else ""


def _toml(value: object) -> str:
    """A TOML value for the plain types a sampling table holds (JSON's string escapes are TOML's too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return json.dumps(value)
