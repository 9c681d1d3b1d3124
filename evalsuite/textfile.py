"""Text files the suite writes for people and programs: reports, comparison JSON, sampling tests.

Model text can hold what UTF-8 cannot: half of a character that a
byte-level tokenizer split off, which a server sends as a lone surrogate
escape and a window around a divergence then shows.  Written strictly, it
stopped the write midway and lost the report.  Here it is written as its
`\\ud83d` escape: JSON reads that back as the same string, and a reader of
Markdown or HTML sees which half character it was.
"""

from __future__ import annotations

from pathlib import Path


def write_text(path: Path | str, text: str) -> None:
    """`text` into `path` as UTF-8, a lone surrogate as its backslash escape."""
    Path(path).write_text(text, encoding="utf-8", errors="backslashreplace")


def append_text(path: Path | str, text: str) -> None:
    """`text` added to the end of `path`, written as `write_text` writes it."""
    with Path(path).open("a", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(text)
