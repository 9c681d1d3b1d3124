"""Reduce a boxed answer written with words to its mathematical content.

`\\boxed{12^{\\mathrm{th}} \\text{ grade}}` means 12; `\\boxed{5 \\text{ cm}^2}`
means 5; `\\boxed{40 \\text{ chickens}, 60 \\text{ cows}}` means the pair 40,
60.  math-verify either fails to parse such text or parses only its first
number, which both rejects right answers and (worse) accepts "40 chickens,
50 cows" for "40, 60".  The rules here only remove words and ordinal marks
and turn "and"/"or" between parts into commas; they never touch an answer
that is all words (`\\text{Evelyn}`, `\\text{(C)}`), which the grader
compares as words.
"""

from __future__ import annotations

import re

from evalsuite.graders.prose import math_head

_ORDINAL = re.compile(
    r"(\d)\s*(?:\^\s*\{?\s*(?:\\(?:mathrm|text|textrm|rm|mbox)\s*\{\s*)?(?:st|nd|rd|th)\s*\}?\s*\}?|(?:st|nd|rd|th)\b)"
)
_TEXT_MACRO = r"\\(?:text|textrm|textnormal|mathrm|mbox|textit|emph|mathit)\s*"
_WHOLE_TEXT = re.compile(rf"^\s*{_TEXT_MACRO}\{{[^{{}}]*\}}\s*\.?\s*$")
_SEPARATOR = re.compile(rf"\s*{_TEXT_MACRO}\{{\s*(?:,\s*)?(?:and|or)\s*\}}\s*|\s*{_TEXT_MACRO}\{{\s*,\s*\}}\s*")
_WORDY_TEXT = re.compile(rf"\s*{_TEXT_MACRO}\{{([^{{}}]*[A-Za-z]{{2}}[^{{}}]*)\}}(?:\s*\^\s*(?:\{{\s*\d\s*\}}|\d))?")
_BARE_WORD = re.compile(r"(?<![\\A-Za-z{])[A-Za-z]{2,}")
_LATEX_WORDS = re.compile(r"\\(?:begin|end|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+")
_DEGREE_WORD = re.compile(rf"\s*(?:{_TEXT_MACRO}\{{\s*degrees?\s*\}}|\bdegrees?\b)", re.IGNORECASE)


def split_top_level(s: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside any brackets: "(1, 2), 3" -> ["(1, 2)", "3"]."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s) and s[i + 1] in "{}":  # set braces \\{ \\} nest too
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def reduce_answer(answer: str) -> str:
    """The mathematical content of a boxed answer (see the module docstring)."""
    s = answer.strip()
    if not s or _WHOLE_TEXT.match(s):
        return s
    s = _ORDINAL.sub(r"\1", s)
    s = _DEGREE_WORD.sub(r"^\\circ", s)
    s = _SEPARATOR.sub(", ", s)
    stripped = _WORDY_TEXT.sub("", s).strip()
    if stripped and re.search(r"[\dA-Za-z\\]", stripped):
        s = stripped
    if _BARE_WORD.search(_LATEX_WORDS.sub("", s)):
        parts = [math_head(p) for p in split_top_level(s)]
        parts = [p for p in parts if p]
        if parts:
            s = ", ".join(parts)
    return re.sub(r"^[,\s]+|[,\s]+$", "", s)
