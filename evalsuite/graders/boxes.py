"""Finding `\\boxed{...}` answers: MATH's convention for marking the final answer."""

from __future__ import annotations

import re

_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*(\{)|\\boxed +([^\s${}]+)")


def _balanced(text: str, open_at: int) -> int | None:
    """Index just past the brace that closes the one at `open_at`, or None if unbalanced."""
    depth = 0
    i = open_at
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """Every complete `\\boxed{...}` / `\\fbox{...}` / `\\boxed x` as (start, end, content).

    Braces are matched with nesting (`\\boxed{\\frac{1}{2}}`), escaped braces
    (`\\{`) are skipped, and an unclosed box (a truncated response) is ignored.
    """
    spans: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        m = _BOX_START.search(text, pos)
        if m is None:
            return spans
        if m.group(1) is not None:
            end = _balanced(text, m.start(1))
            if end is None:
                pos = m.end()
                continue
            spans.append((m.start(), end, text[m.start(1) + 1 : end - 1].strip()))
            pos = end
        else:
            spans.append((m.start(), m.end(), m.group(2).strip()))
            pos = m.end()
