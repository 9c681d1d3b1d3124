"""GSM8K graders: our exact numeric match, and lm-evaluation-harness's scoring.

`GSM8KGrader` extracts the final number (the `#### N` line the prompt asks
for, then fallbacks) and compares it with the reference's `#### N` line as an
exact decimal: "1,000", "$1000.00" and "1000." all equal 1000.

`LMEvalGSM8KGrader` reproduces the `gsm8k` task of lm-evaluation-harness so
numbers can be set beside published ones (see its docstring for the exact
source).  Both are pure regex work, so they grade in the calling process.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Callable, Sequence

from evalsuite.graders import GradeInput
from evalsuite.graders.extract import STEPS, format_number, miss_reason, parse_number, resolve_steps
from evalsuite.graders.options import check_options
from evalsuite.graders.prose import strip_thinking
from evalsuite.records import Grade

_REFERENCE_LINE = re.compile(r"####\s*([^\n]*)")
_BARE_NUMBER = re.compile(r"\s*-?\$?[\d,]*\.?\d+\s*")


def reference_number(reference: Any) -> Decimal | None:
    """The number on the reference's last `#### N` line (or the reference itself if it is a bare number)."""
    text = str(reference)
    lines = _REFERENCE_LINE.findall(text)
    if lines:
        return parse_number(lines[-1])
    return parse_number(text) if _BARE_NUMBER.fullmatch(text) else None


def _ungraded(item: GradeInput, reason: str) -> Grade:
    return Grade(item.sample.id, "ungraded", None, reason, 0.0, {"truncated": item.truncated})


def grade_each(grade_one: Callable[[GradeInput], Grade], items: Sequence[GradeInput]) -> list[Grade]:
    """Grade items one by one in this process; an exception marks that item ungraded, never the batch."""
    out = []
    for item in items:
        try:
            out.append(grade_one(item))
        except Exception as exc:  # noqa: BLE001 - one bad sample must not stop a run
            out.append(_ungraded(item, f"grader error: {type(exc).__name__}: {exc}"))
    return out


class GSM8KGrader:
    """Exact numeric match of the final number; the pipeline's first step that yields a number wins."""

    name = "gsm8k"
    version = "gsm8k-1"
    STEP_NAMES = ("hash_line", "last_boxed", "final_answer_is", "final_sentence", "last_number")

    def __init__(self, extraction: Sequence[str] = ("hash_line", "last_number"), **options: Any) -> None:
        check_options(self.name, options, {})
        self.steps = tuple(resolve_steps(extraction, self.name, self.STEP_NAMES))
        self.version = f"gsm8k-1+{'.'.join(self.steps)}"

    def _extract(self, text: str) -> tuple[str, Decimal] | None:
        text = strip_thinking(text)  # the answer follows the reasoning block, if any
        for step in self.steps:
            found = STEPS[step](text)
            if found is None:
                continue
            value = parse_number(found.answer)
            if value is not None:
                return step, value
        return None

    def grade_one(self, item: GradeInput) -> Grade:
        """Grade one completion against its reference."""
        gold = reference_number(item.sample.reference)
        if gold is None:
            return _ungraded(item, "the reference has no '#### N' line with a number")
        found = self._extract(item.text or "")
        details: dict[str, Any] = {"truncated": item.truncated, "gold": format_number(gold)}
        if found is None:
            return Grade(item.sample.id, "incorrect", None, miss_reason(self.steps), 0.0, details)
        step, value = found
        details["step"] = step
        shown, want = format_number(value), format_number(gold)
        if value == gold:
            return Grade(item.sample.id, "correct", shown, f"numbers equal: {shown} = {want}", 1.0, details)
        return Grade(item.sample.id, "incorrect", shown, f"numbers differ: {shown} != {want}", 0.0, details)

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order.  `workers` is accepted for the protocol; regexes need none."""
        return grade_each(self.grade_one, items)


# lm-evaluation-harness 0.4.13, lm_eval/tasks/gsm8k/gsm8k.yaml (task metadata version 3.0):
# two filter pipelines, each "regex" then "take_first", scored by exact_match
# with ignore_case and these regexes_to_ignore, under these stop sequences.
LMEVAL_FILTERS: dict[str, tuple[str, int]] = {
    "strict-match": (r"#### (\-?[0-9\.\,]+)", 0),
    "flexible-extract": (r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1),
}
LMEVAL_IGNORE = (",", r"\$", r"(?s).*#### ", r"\.$")
LMEVAL_UNTIL = ("Question:", "</s>", "<|im_end|>")
LMEVAL_FALLBACK = "[invalid]"


def lmeval_filter(text: str, pattern: str, group_select: int) -> str:
    """lm-eval's RegexFilter: the `group_select`-th match (first non-empty group of it), stripped."""
    matches = re.findall(pattern, text)
    if not matches:
        return LMEVAL_FALLBACK
    match = matches[group_select]
    if isinstance(match, tuple):
        match = next((m for m in match if m), LMEVAL_FALLBACK)
    return match.strip()


def lmeval_normalize(text: str) -> str:
    """lm-eval's exact_match preprocessing: each ignore-regex removed in turn, then lower case."""
    for pattern in LMEVAL_IGNORE:
        text = re.sub(pattern, "", text)
    return text.lower()


def lmeval_cut(text: str, until: Sequence[str]) -> str:
    """The text up to the first stop sequence, as lm-eval's generation would have ended it."""
    cut = len(text)
    for stop in until:
        at = text.find(stop)
        if at != -1:
            cut = min(cut, at)
    return text[:cut]


class LMEvalGSM8KGrader:
    """lm-evaluation-harness `gsm8k` scoring, reimplemented faithfully.

    Source: lm-eval 0.4.13 (PyPI), `lm_eval/tasks/gsm8k/gsm8k.yaml`, task
    metadata version 3.0: filters "strict-match" (regex `#### (\\-?[0-9\\.\\,]+)`,
    first match) and "flexible-extract" (regex `(-?[$0-9.,]{2,})|(-?[0-9]+)`,
    last match), fallback "[invalid]"; metric exact_match with ignore_case and
    regexes_to_ignore `,` `\\$` `(?s).*#### ` `\\.$` applied to prediction and
    reference alike; generation stopped at "Question:", "</s>", "<|im_end|>".
    Reimplemented instead of imported because lm-eval brings some thirty
    packages (scikit-learn, nltk, sacrebleu...) for two regexes.

    `extraction` lists the filters to score, both by default; the first sets
    the status and every one is recorded in `details`.  Option `until`
    overrides the stop sequences (an empty list cuts nothing).
    """

    name = "gsm8k_lmeval"

    def __init__(self, extraction: Sequence[str] = ("strict-match", "flexible-extract"), **options: Any) -> None:
        check_options(self.name, options, {"until": list})
        self.filters = tuple(resolve_steps(extraction, self.name, tuple(LMEVAL_FILTERS)))
        self.until = tuple(str(s) for s in options.get("until", LMEVAL_UNTIL))
        self.version = f"lm-eval-0.4.13-gsm8k-v3.0+{'.'.join(self.filters)}"

    def grade_one(self, item: GradeInput) -> Grade:
        """Score every configured filter; the first decides the status."""
        reference = lmeval_normalize(str(item.sample.reference))
        text = lmeval_cut(item.text or "", self.until)
        details: dict[str, Any] = {"truncated": item.truncated, "primary": self.filters[0]}
        for name in self.filters:
            pattern, group = LMEVAL_FILTERS[name]
            got = lmeval_filter(text, pattern, group)
            details[name] = {"extracted": got, "correct": lmeval_normalize(got) == reference}
        first = details[self.filters[0]]
        extracted = None if first["extracted"] == LMEVAL_FALLBACK else first["extracted"]
        if extracted is None:
            reason = f"{self.filters[0]}: no match ({LMEVAL_FALLBACK})"
        else:
            verdict = "equal" if first["correct"] else "not equal"
            reason = f"{self.filters[0]}: {verdict} after lm-eval normalisation ({lmeval_normalize(extracted)!r} vs {reference!r})"
        status = "correct" if first["correct"] else "incorrect"
        return Grade(item.sample.id, status, extracted, reason, 1.0 if first["correct"] else 0.0, details)

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order.  `workers` is accepted for the protocol; regexes need none."""
        return grade_each(self.grade_one, items)
