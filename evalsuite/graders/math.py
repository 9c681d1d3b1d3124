"""MATH / MATH-500 grader: extract the final answer, compare it with the reference.

Extraction is the spec's named pipeline (default: the last `\\boxed{}`, then
"the final answer is ..."); equivalence is `equiv.check_equivalence` (math-verify with
guards).  Every sample is graded in a worker process under a deadline, so a
pathological expression marks that one sample `ungraded` and the run goes on;
this also keeps math-verify's signal-based machinery out of the caller's
threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from evalsuite.graders import GradeInput
from evalsuite.graders.extract import miss_reason, resolve_steps, run_pipeline
from evalsuite.graders.options import check_options
from evalsuite.graders.pool import Failure, GradingTimeout, run_isolated, soft_deadline
from evalsuite.graders.prose import approximate_cue, clean_response
from evalsuite.records import Grade, GradeStatus

_APPROX_WINDOW = 400
"""Characters at the end of a response searched for "approximately" / "≈" next to the answer."""
_GRACE_S = 5.0
"""Extra time the parent gives a worker past the soft deadline before killing it."""


def _dist_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


@dataclass(frozen=True)
class MathItem:
    """One sample's grading job, as sent to a worker (plain, picklable)."""

    sample_id: str
    reference: str
    text: str
    truncated: bool
    steps: tuple[str, ...]
    timeout_s: float
    problem: str = ""


def grade_math_item(item: MathItem) -> Grade:
    """Grade one sample (runs in a worker process; never raises)."""
    from evalsuite.graders.equiv import check_equivalence  # heavy import (sympy): workers only
    from evalsuite.graders.lenient import precision_cue
    from evalsuite.graders.normal_form import asked_forms

    details: dict[str, Any] = {"truncated": item.truncated}
    extracted: str | None = None
    try:
        with soft_deadline(item.timeout_s):
            found = run_pipeline(item.steps, item.text, truncated=item.truncated)
            if found is None:
                return Grade(item.sample_id, "incorrect", None, miss_reason(item.steps), 0.0, details)
            extracted = found.answer
            details.update(step=found.step, matches=found.count)
            tail = clean_response(item.text)[-_APPROX_WINDOW:]
            equivalence = check_equivalence(
                item.reference,
                found.answer,
                joined=found.joined,
                approx=approximate_cue(tail),
                precision=precision_cue(item.problem),
                forms=asked_forms(item.problem),
            )
    except GradingTimeout as exc:
        return Grade(item.sample_id, "ungraded", extracted, f"grading {exc}", 0.0, details)
    except Exception as exc:  # noqa: BLE001 - one bad sample must not stop a run
        return Grade(item.sample_id, "ungraded", extracted, f"grader error: {type(exc).__name__}: {exc}", 0.0, details)
    details.update(equivalence.details)
    if equivalence.details.get("used_joined"):
        extracted = found.joined
    status: GradeStatus = "correct" if equivalence.equal else "incorrect"
    return Grade(item.sample_id, status, extracted, equivalence.reason, 1.0 if equivalence.equal else 0.0, details)


class MathGrader:
    """Grades MATH-style answers (`\\boxed{}`) against a LaTeX reference.

    Options: `timeout_s` (per sample, default 10): after it the sample is
    `ungraded` with the reason.  The problem text (the last user message)
    is read for a request of a rounded answer ("to the nearest tenth"),
    which lets a correctly rounded decimal count, and for a requested normal
    form ("integers with gcd 1", "simplest form"), which an equal value must
    also be in.
    """

    name = "math"

    def __init__(
        self, extraction: Sequence[str] = ("last_boxed", "final_answer_is", "final_sentence"), **options: Any
    ) -> None:
        check_options(self.name, options, {"timeout_s": (int, float)})
        self.steps = tuple(resolve_steps(extraction, self.name))
        self.timeout_s = float(options.get("timeout_s", 10.0))
        self.version = (
            f"math-4+{'.'.join(self.steps)}+math-verify-{_dist_version('math-verify')}+sympy-{_dist_version('sympy')}"
        )

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order; grading runs in `workers` processes (default: all CPUs)."""
        grades: list[Grade | None] = [None] * len(items)
        jobs: list[MathItem] = []
        where: list[int] = []
        for i, item in enumerate(items):
            ref = item.sample.reference
            if ref is None or (isinstance(ref, str) and not ref.strip()):
                grades[i] = Grade(
                    item.sample.id,
                    "ungraded",
                    None,
                    "the sample has no reference answer",
                    0.0,
                    {"truncated": item.truncated},
                )
                continue
            problem = next(
                (m.get("content", "") for m in reversed(item.sample.messages) if m.get("role") == "user"), ""
            )
            jobs.append(
                MathItem(item.sample.id, str(ref), item.text or "", item.truncated, self.steps, self.timeout_s, problem)
            )
            where.append(i)
        results = run_isolated(
            grade_math_item,
            jobs,
            workers=workers,
            timeout_s=self.timeout_s + _GRACE_S,
            preload=("evalsuite.graders.equiv",),
        )
        for i, job, result in zip(where, jobs, results):
            if isinstance(result, Failure):
                result = Grade(job.sample_id, "ungraded", None, result.message, 0.0, {"truncated": job.truncated})
            grades[i] = result
        return [g for g in grades if g is not None]
