"""A divergence next to half a character: the report is written whole, and its JSON reads back the same.

Byte-level tokenizers split characters (an emoji's four bytes over two
tokens); a server names such a token by a lone surrogate, which the window
around a divergence then holds.  UTF-8 cannot hold one: the report's files
write it as its escape, and nothing of the report is lost.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evalsuite.compare import compare_runs
from evalsuite.records import Completion, Grade, SampleResult, TokenTrace
from evalsuite.report import write_reports
from evalsuite.store import MemoryRun
from evalsuite.textfile import append_text, write_text

HALF = "\ud83d"  # the first half of an emoji, as a token decoded on its own arrives
FIELDS = {"task": "t", "prompt_template": "p", "params": {}, "dataset": {}, "server": {"model": "m"}}


def _run(name: str, last: str) -> MemoryRun:
    pieces = ["Hi", " there", HALF, last]
    trace = TokenTrace(
        np.full(4, -1, np.int64),  # no ids: the tokens are their strings
        pieces,
        [],
        np.full(4, -0.5, np.float32),
        np.full((4, 2), -1, np.int64),
        np.array([[-0.5, -1.0]] * 4, np.float32),
        [[p, "x"] for p in pieces],
    )
    result = SampleResult("s1", "t", {}, Completion("Hi there" + HALF + last, "stop", trace))
    manifest = {"fingerprint": name, "target": name, "task": "t", "fingerprint_fields": {**FIELDS, "target": name}}
    return MemoryRun(manifest, {"s1": result}, {"s1": Grade("s1", "correct", "1", "r")})


def test_a_window_holding_half_a_character_is_written_as_its_escape(tmp_path: Path) -> None:
    comparison = compare_runs(_run("cand", "!"), _run("base", "?"), n_resamples=50)
    (diff,) = [d for d in comparison.diffs if not d.identical]
    assert diff.first_divergence == 3 and diff.context.endswith(HALF)
    paths = write_reports([comparison], tmp_path)
    for path in (paths.markdown, paths.html, *paths.json):
        assert "\\ud83d" in path.read_text(encoding="utf-8"), path  # the escape, in a file UTF-8 reads
    (written,) = json.loads(paths.json[0].read_text(encoding="utf-8"))["divergences"]
    assert written["window"].startswith("…Hi there" + HALF)  # the JSON reads back the string itself


def test_the_suites_text_files_write_and_append_half_a_character_as_its_escape(tmp_path: Path) -> None:
    path = tmp_path / "sampling.md"
    write_text(path, f"over-represented {HALF!s}\n")
    append_text(path, f"and again {HALF}é\n")
    assert path.read_text(encoding="utf-8") == "over-represented \\ud83d\nand again \\ud83dé\n"
