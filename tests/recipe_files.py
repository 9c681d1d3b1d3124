"""The recipes in recipes/ (each a baseline, a control and a speculative target): their served command lines."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evalsuite.config import Config, load_config

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "recipes").glob("*.toml"))


@dataclass(frozen=True)
class Command:
    """One served target of a recipe: its engine and the argv its `serve.command` runs."""

    recipe: str
    target: str
    engine: str
    argv: list[str]

    @property
    def program(self) -> list[str]:
        """The words that start the server: `llama-server`, `vllm serve`, `python -m sglang.launch_server`."""
        return self.argv[:1] if self.engine == "llamacpp" else self.argv[:2] if self.engine == "vllm" else self.argv[:3]

    @property
    def args(self) -> list[str]:
        """The server's own arguments, after its program."""
        return self.argv[len(self.program) :]

    @property
    def flags(self) -> list[str]:
        """Every option named, without its value (`--a=b` gives `--a`)."""
        return [a.split("=", 1)[0] for a in self.args if a.startswith("-") and not _is_number(a)]

    def value(self, flag: str) -> str | None:
        """The value after `flag`, or None where the command does not give it."""
        if flag not in self.argv:
            return None
        i = self.argv.index(flag)
        return self.argv[i + 1] if i + 1 < len(self.argv) else None

    def speculative_config(self) -> dict[str, object] | None:
        text = self.value("--speculative-config")
        return None if text is None else dict(json.loads(text))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load(path: Path) -> Config:
    return load_config(path)


def commands(engine: str | None = None) -> list[Command]:
    """Every served target of every recipe (of one engine when named)."""
    found = []
    for path in RECIPES:
        for name, target in load(path).targets.items():
            if target.serve is not None and engine in (None, target.engine):
                found.append(Command(path.name, name, target.engine, target.serve.argv()))
    return found
