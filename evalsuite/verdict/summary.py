"""The one-line summary that combines the token and accuracy verdicts.

It opens with the token verdict's own label (IDENTICAL, NUMERICAL-ONLY, LOSSY, UNDETERMINED), the word the
JSON, the report's tables and the gate use too, so a headline never needs translating.
"""

from __future__ import annotations

import math

from evalsuite.stats.summary import PairedSummary
from evalsuite.verdict.accuracy import AccuracyVerdict
from evalsuite.verdict.token import TokenVerdict


def _token_part(t: TokenVerdict) -> str:
    head = f"{t.identical}/{t.n} token-identical"
    div = t.divergent
    if t.label == "IDENTICAL":
        return f"IDENTICAL: {head}"
    if t.label == "NUMERICAL-ONLY":
        if t.explained_by_control == 0:
            how = "all at near-ties"
        elif t.explained_by_control == div:
            how = "all where a control run also diverged"
        else:
            how = "all at near-ties or where a control run also diverged"
        return f"NUMERICAL-ONLY: {head}, {div} divergence{'s' if div != 1 else ''} {how}"
    if t.label == "LOSSY":
        conf = t.kinds.get("confident", 0)
        if conf:
            return (
                f"LOSSY: {head}, {conf} divergence{'s' if conf != 1 else ''} to a token the baseline held well "
                f"below its own (gap up to {t.max_gap:.3g} nats)"
            )
        return f"LOSSY: {head}, diverging more often than the control"
    return f"UNDETERMINED: {head}, {t.kinds.get('unknown', 0)} divergences without logprobs"


def _accuracy_part(s: PairedSummary | None, a: AccuracyVerdict | None, task: str = "") -> str:
    if s is None or a is None:
        return "accuracy not graded"
    prefix = f"{task} " if task else ""
    acc = f"{prefix}accuracy {s.candidate.accuracy * 100:.1f} % vs {s.baseline.accuracy * 100:.1f} %"
    if a.label == "EQUIVALENT":
        return f"{acc}, equivalent within ±{a.delta * 100:g} points"
    if a.label == "DIFFERENT":
        p = s.p_value if math.isnan(s.p_adjusted) else s.p_adjusted
        return f"{acc}, different ({s.difference * 100:+.1f} points, p = {p:.2g})"
    return f"{acc}, inconclusive at ±{a.delta * 100:g} points (about {a.n_to_settle:,} items would settle it)"


def summary_line(token: TokenVerdict, accuracy: list[tuple[str, PairedSummary, AccuracyVerdict]] | None = None) -> str:
    """E.g. 'NUMERICAL-ONLY: 493/500 token-identical, 7 divergences all at near-ties;
    accuracy 87.0 % vs 86.8 %, equivalent within ±2 points'."""
    if not accuracy:
        return f"{_token_part(token)}; {_accuracy_part(None, None)}"
    if len(accuracy) == 1:
        _, s, a = accuracy[0]
        return f"{_token_part(token)}; {_accuracy_part(s, a)}"
    parts = "; ".join(_accuracy_part(s, a, task) for task, s, a in accuracy)
    return f"{_token_part(token)}; {parts}"
