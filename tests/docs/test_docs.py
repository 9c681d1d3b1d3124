"""The user documentation runs as written: every ```toml block loads as a config, and every `evalsuite ...`
command line names a real subcommand with real flags (parsed by the CLI's own argparse parsers).

A toml block is one of three kinds, told apart by an HTML comment on the line before its fence:
- `<!-- recipe: recipes/NAME.toml -->`: the recipe file's text (its comment header may be left out); the
  file loads as a config, so the block does too;
- `<!-- fragment: WHAT -->`: part of a file (a task spec's keys, a plugin's table); it must parse as TOML;
- no comment: a complete config, loaded as an `evalsuite.toml` of its own.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from evalsuite.cli import build_parser
from evalsuite.config import load_config
from evalsuite.rig.command import build_parser as build_rig_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
MARKER = re.compile(r"<!--\s*(recipe|fragment):\s*([^,>]*?)\s*(?:,[^>]*)?-->\s*$")
INLINE = re.compile(r"`(evalsuite [^`]+)`")


def _blocks(kind: str) -> list[tuple[str, str, str | None, str | None]]:
    """(where, text, marker kind, marker value) of every fenced block of `kind` in the docs."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) != kind:
                continue
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.search(before)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            found.append(
                (where, match.group(2), marker.group(1) if marker else None, marker.group(2) if marker else None)
            )
    return found


@pytest.mark.parametrize(("where", "text", "kind", "value"), _blocks("toml"), ids=lambda v: str(v)[:40])
def test_every_toml_block_loads(where: str, text: str, kind: str | None, value: str | None, tmp_path: Path) -> None:
    tomllib.loads(text)  # every kind parses
    if kind == "fragment":
        return
    if kind == "recipe":
        assert value is not None
        recipe = ROOT / value
        whole = recipe.read_text(encoding="utf-8")
        assert text.strip() in (whole.strip(), whole[whole.index("[targets.") :].strip()), (
            f"{where} differs from {value}"
        )
        load_config(recipe)
        return
    config = tmp_path / "evalsuite.toml"
    config.write_text(text, encoding="utf-8")
    load_config(config)


def _command_lines() -> list[tuple[str, str]]:
    """(where, command) for every `evalsuite ...` line of a code block (fenced or indented) and every inline
    code span that starts with `evalsuite `, split at `;`, `&&` and pipes, comments dropped."""
    found = []
    for path in DOCS:
        fenced = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            code = fenced or line.startswith("    ")
            stripped = line.strip().removeprefix("$ ")
            candidates = [stripped] if code and stripped.startswith("evalsuite ") else []
            candidates += [m.group(1) for m in INLINE.finditer(line)] if not code else []
            for candidate in candidates:
                for part in re.split(r"\s(?:;|&&|\|\|?)\s|;\s", re.split(r"\s#", candidate)[0]):
                    if part.strip().startswith("evalsuite "):
                        found.append((f"{path.relative_to(ROOT)}:{number}", part.strip()))
    return found


COMMANDS = _command_lines()


def test_the_docs_have_commands_to_check() -> None:
    assert len(COMMANDS) > 50


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w} {c}"[:70] for w, c in COMMANDS])
def test_every_evalsuite_command_in_the_docs_parses(where: str, command: str) -> None:
    argv = [_optional(a) for a in shlex.split(command)[1:]]
    parser = build_rig_parser() if argv[:1] == ["rig"] else build_parser()
    argv = argv[1:] if argv[:1] == ["rig"] else argv
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as exc:
        message = (err.getvalue().strip().splitlines() or [""])[-1]
        # a command named in prose without its arguments (`evalsuite compare`) still names a real one
        assert exc.code == 0 or "arguments are required" in message, f"{where}: `{command}`: {message}"


def _optional(word: str) -> str:
    """`[--flag]`, the usual mark of an optional flag, as the flag itself."""
    return word[1:-1] if word.startswith("[-") and word.endswith("]") else word
