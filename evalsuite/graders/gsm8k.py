"""GSM8K graders: our exact numeric match, and lm-evaluation-harness's scoring.

`GSM8KGrader` extracts the final number (the `#### N` line the prompt asks
for, then fallbacks) and compares it with the reference's `#### N` line as an
exact decimal: "1,000", "$1000.00" and "1000." all equal 1000.

`LMEvalGSM8KGrader` scores with the `gsm8k` task of lm-evaluation-harness
itself (the lmeval extra), so numbers can be set beside published ones.  Both
grade in the calling process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalsuite.graders import GradeInput
from evalsuite.graders.extract import STEPS, format_number, miss_reason, parse_number, resolve_steps
from evalsuite.graders.options import check_options
from evalsuite.graders.prose import clean_response
from evalsuite.records import Grade, GradeStatus

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
        text = clean_response(text)  # the answer follows the reasoning block, if any
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


# lm-evaluation-harness's `gsm8k` task (lm_eval/tasks/gsm8k/gsm8k.yaml): its two
# filter pipelines, scored by its exact_match, through the lm-eval adapter.
LMEVAL_FILTER_NAMES = ("strict-match", "flexible-extract")
LMEVAL_UNTIL = ("Question:", "</s>", "<|im_end|>")
LMEVAL_FALLBACK = "[invalid]"


def lmeval_cut(text: str, until: Sequence[str]) -> str:
    """The text up to the first stop sequence, as lm-eval's generation would have ended it."""
    cut = len(text)
    for stop in until:
        at = text.find(stop)
        if at != -1:
            cut = min(cut, at)
    return text[:cut]


@lru_cache(maxsize=1)
def _gsm8k_task() -> tuple[Any, str]:
    """lm-eval's own gsm8k task (filters and metric as it ships them) and its version; loaded once."""
    from evalsuite.lmeval import version
    from evalsuite.lmeval.grader import scoring_task
    from evalsuite.lmeval.select import LMEvalOptions, leaves

    [leaf] = leaves(LMEvalOptions.model_validate({"task": "gsm8k", "num_fewshot": 0}), Path.cwd())
    task_version = (leaf.config.get("metadata") or {}).get("version")
    return scoring_task(leaf, [{"question": "", "answer": ""}]), f"lm-eval-{version()}-gsm8k-v{task_version}"


class LMEvalGSM8KGrader:
    """lm-evaluation-harness `gsm8k` scoring, by lm-eval itself.

    Filters "strict-match" (the first `#### N`) and "flexible-extract" (the
    last number), then exact_match after lm-eval's normalisation, exactly as
    the installed lm-eval's gsm8k task configures them (the lmeval extra;
    0.4.13 pinned).  The response is first cut at "Question:", "</s>",
    "<|im_end|>", where lm-eval's requests stop.  One implementation of
    lm-eval's scoring: lm-eval's, through `evalsuite.lmeval`.

    `extraction` lists the filters to score, both by default; the first sets
    the status and every one is recorded in `details`.  Option `until`
    overrides the stop sequences (an empty list cuts nothing).
    """

    name = "gsm8k_lmeval"

    def __init__(self, extraction: Sequence[str] = LMEVAL_FILTER_NAMES, **options: Any) -> None:
        check_options(self.name, options, {"until": list})
        self.filters = tuple(resolve_steps(extraction, self.name, LMEVAL_FILTER_NAMES))
        self.until = tuple(str(s) for s in options.get("until", LMEVAL_UNTIL))

    @property
    def version(self) -> str:
        """lm-eval's version and the gsm8k task's, with the filters used (loads lm-eval's task)."""
        return f"{_gsm8k_task()[1]}+{'.'.join(self.filters)}"

    def _grade(self, item: GradeInput, scored: dict[str, dict[str, Any]]) -> Grade:
        details: dict[str, Any] = {"truncated": item.truncated, "primary": self.filters[0]}
        for name in self.filters:
            got = scored[name]
            details[name] = {"extracted": str(got["filtered"]), "correct": float(got["exact_match"]) == 1.0}
        first = details[self.filters[0]]
        extracted = None if first["extracted"] == LMEVAL_FALLBACK else first["extracted"]
        if extracted is None:
            reason = f"{self.filters[0]}: no match ({LMEVAL_FALLBACK})"
        else:
            relation = "equal" if first["correct"] else "not equal"
            reason = f"{self.filters[0]}: {relation} to the reference after lm-eval's exact_match normalisation"
        status: GradeStatus = "correct" if first["correct"] else "incorrect"
        return Grade(item.sample.id, status, extracted, reason, 1.0 if first["correct"] else 0.0, details)

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order, all scored by lm-eval in one pass.  `workers` is not needed."""
        if not items:
            return []
        from evalsuite.lmeval.grader import score

        task = _gsm8k_task()[0]
        docs = [{"question": "", "answer": str(item.sample.reference)} for item in items]
        texts = [lmeval_cut(item.text or "", self.until) for item in items]
        out = []
        for item, scored in zip(items, score(task, docs, texts)):
            try:
                out.append(self._grade(item, scored))
            except Exception as exc:  # noqa: BLE001 - one bad sample must not stop a run
                out.append(_ungraded(item, f"grader error: {type(exc).__name__}: {exc}"))
        return out
