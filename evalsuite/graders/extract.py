"""Answer extraction as named steps: find the final answer in a model's text.

A task spec lists step names (`grader.extraction: [last_boxed, final_answer_is]`);
the grader tries them in order and the first that finds something wins.  Every
step is a pure function of the text, so a grade can say which step hit and a
re-grade with another pipeline needs no new generation.

The steps know nothing about the reference: deciding whether the answer is
right is the grader's job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from evalsuite.errors import ConfigError
from evalsuite.graders.boxes import boxed_spans
from evalsuite.graders.prose import clean_response, mark_currency, reduce_clause, word_answer
from evalsuite.graders.restate import restate
from evalsuite.graders.sentence import stated_answer, unbox


@dataclass(frozen=True)
class Extraction:
    """What one step found.

    `answer` is the raw answer string (LaTeX for math, digits for GSM8K).
    `joined` is set by `last_boxed` when the text ends with several adjacent
    boxed answers (`\\boxed{1}, \\boxed{-2}`): all of them joined by ", ".  The
    math grader uses it only when the reference itself has several answers, so
    a solution that boxes one value twice is not turned into a two-answer set.
    """

    step: str
    answer: str
    joined: str | None = None
    count: int = 1


StepFunc = Callable[[str], "Extraction | None"]

# Text allowed between two boxed answers for them to count as one list:
# punctuation, math delimiters, "and"/"or" (plain or in \text{}), spacing macros.
_JOIN_GAP = re.compile(
    r"^(?:[\s$,;.]|\\[(),;]|\\q?quad|\\text\{\s*(?:and|or|,)\s*\}|\band\b|\bor\b)*$",
    re.IGNORECASE,
)


def last_boxed(text: str) -> Extraction | None:
    """The content of the last complete `\\boxed{}` (or `\\fbox{}`), MATH's answer convention."""
    spans = boxed_spans(text)
    if not spans:
        return None
    run = [spans[-1]]
    for prev in reversed(spans[:-1]):
        if not _JOIN_GAP.match(text[prev[1] : run[0][0]]):
            break
        run.insert(0, prev)
    joined = ", ".join(s[2] for s in run) if len(run) > 1 else None
    return Extraction("last_boxed", spans[-1][2], joined=joined, count=len(spans))


_FINAL_ANSWER = re.compile(
    r"(?:(?:final\s+answer|the\s+answer)\s*(?:is|:|=)|^[\s*#]*answer\s*\**\s*:)\s*:?\s*(?:\*\*)?\s*",
    re.IGNORECASE | re.MULTILINE,
)


def _strip_answer(answer: str) -> str:
    answer = answer.strip().strip("*").strip()
    answer = re.sub(r"[\s.;:,]+$", "", answer)
    return answer.strip()


def final_answer_is(text: str) -> Extraction | None:
    """The answer after the last "final answer is" / "the answer is" / "Answer:".

    A `\\boxed{}` right there is the answer; otherwise the clause is reduced
    to its mathematical part (`prose.reduce_clause`): a math span in it
    (`definitely \\(8000\\)`), or the number without the words around it
    (`9 customers`, `three boxes`).
    """
    text = mark_currency(text)
    last = None
    for m in _FINAL_ANSWER.finditer(text):
        last = m
    if last is None:
        return None
    rest = text[last.end() :].lstrip()
    if rest.startswith(("\\boxed", "\\fbox")) and boxed_spans(rest):
        answer = boxed_spans(rest)[0][2]
    else:
        answer = unbox(reduce_clause(restate(rest)))
    answer = _strip_answer(answer)
    if not re.search(r"\w", answer):  # nothing, or a lone "$" where the response was cut
        return _word_extraction(rest)
    return Extraction("final_answer_is", answer)


_LATER_VALUE = re.compile(r"\d|\$|\\[(\[]|\\boxed")


def _word_extraction(rest: str) -> Extraction | None:
    """A word answer ("the final answer is east."), unless a number or math is stated after it."""
    word = word_answer(rest)
    if word is None:
        return None
    end = re.search(r"[.!?](?=\s|$)|\n", rest)
    after = rest[end.end() :] if end else ""
    return None if _LATER_VALUE.search(after) else Extraction("final_answer_is", word)


# A number as people write it: optional minus, optional "$", thousands
# separators only in groups of three (so "1,2,3" stays three numbers).
_NUMBER = re.compile(r"(?<![\w.])(-)?\$?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?![\d])")


def parse_number(text: str) -> Decimal | None:
    """The first number in `text` ("$1,234.50" -> 1234.50, "-7." -> -7), or None."""
    m = _NUMBER.search(text)
    if m is None:
        return None
    return _to_decimal(m)


def _to_decimal(m: re.Match[str]) -> Decimal | None:
    try:
        value = Decimal(m.group(2).replace(",", ""))
    except InvalidOperation:
        return None
    return -value if m.group(1) else value


def format_number(value: Decimal) -> str:
    """A canonical string for a number: "18", "-3.5" (no exponent, no trailing zeros)."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def hash_line(text: str) -> Extraction | None:
    """The number on the last `#### N` line: GSM8K's own final-answer format."""
    last = None
    for m in re.finditer(r"####\s*([^\n]*)", text):
        last = m
    if last is None:
        return None
    value = parse_number(last.group(1))
    return None if value is None else Extraction("hash_line", format_number(value))


def last_number(text: str) -> Extraction | None:
    """The last number anywhere in the text: the lenient fallback for numeric tasks."""
    last = None
    for m in _NUMBER.finditer(text):
        last = m
    if last is None:
        return None
    value = _to_decimal(last)
    return None if value is None else Extraction("last_number", format_number(value))


def final_sentence(text: str) -> Extraction | None:
    """The answer stated in prose in the last sentences ("...so the number of divisors is 9.").

    See `sentence.stated_answer`.  Never meant for a response cut by
    max_tokens, where the last number is noise: `run_pipeline` skips it then.
    """
    answer = stated_answer(text)
    return None if answer is None else Extraction("final_sentence", _strip_answer(answer))


STEPS: dict[str, StepFunc] = {
    "last_boxed": last_boxed,
    "final_answer_is": final_answer_is,
    "hash_line": hash_line,
    "last_number": last_number,
    "final_sentence": final_sentence,
}

NEEDS_COMPLETE = frozenset({"final_sentence", "last_number"})
"""Steps that guess from the end of the text: skipped when the response was cut by max_tokens."""

MISS_TEXT: dict[str, str] = {
    "last_boxed": "no \\boxed{}",
    "final_answer_is": "no 'final answer is'",
    "hash_line": "no '#### N' line",
    "last_number": "no number",
    "final_sentence": "no final sentence stating a number",
}
"""How each step's miss reads in a grade's reason ("no \\boxed{} and no 'final answer is' found")."""


def resolve_steps(names: Sequence[str], grader: str, allowed: Sequence[str] | None = None) -> list[str]:
    """Check a spec's extraction names; an unknown or disallowed one is a ConfigError naming it."""
    known = list(allowed) if allowed is not None else list(STEPS)
    if not names:
        raise ConfigError(f"Grader '{grader}' needs at least one extraction step; known steps: {', '.join(known)}.")
    for name in names:
        if name not in known:
            raise ConfigError(f"Grader '{grader}': unknown extraction step '{name}'. Known steps: {', '.join(known)}.")
    return list(names)


def run_pipeline(names: Sequence[str], text: str, *, truncated: bool = False) -> Extraction | None:
    """The first hit of the named steps, in order, or None when none finds an answer.

    Reasoning blocks (`<think>...</think>`) and template markers
    (`<|im_end|>`) are removed first: the answer is what follows the
    reasoning, and a marker after the last line does not make a finished
    response look cut.  On a truncated response the guessing steps
    (`NEEDS_COMPLETE`) are skipped.
    """
    text = clean_response(text)
    for name in names:
        if truncated and name in NEEDS_COMPLETE:
            continue
        found = STEPS[name](text)
        if found is not None:
            return found
    return None


def miss_reason(names: Sequence[str]) -> str:
    """Why nothing was extracted, e.g. "no \\boxed{} and no 'final answer is' found"."""
    parts = [MISS_TEXT.get(n, f"no {n}") for n in names]
    return " and ".join(parts) + " found"
