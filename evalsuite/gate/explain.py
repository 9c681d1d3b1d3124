"""Decide whether one sample passes the gate, and explain a failure so it can be read in a CI log.

`strict` fails any divergence from the baseline.  `numerical` lets a
divergence pass when `evalsuite.diff.classify` called it numerical (a
near-tie below the threshold, or the very place a control run also
diverged); a confident divergence fails, and so does one without logprobs,
since nothing then shows it was numerics.  A failure opens with the token label the sample would get
in a comparison (LOSSY, UNDETERMINED, NUMERICAL-ONLY), the words of the headline and the report.
"""

from __future__ import annotations

import math

from evalsuite.diff.align import SampleDiff
from evalsuite.diff.classify import Thresholds
from evalsuite.gate.policy import Policy
from evalsuite.records import Completion, Grade, TokenTrace
from evalsuite.verdict.token import gap_text

BEFORE = 5
AFTER = 4
PIECE_WIDTH = 22


def passes(diff: SampleDiff, policy: Policy) -> bool:
    """True when the sample passes under the policy."""
    if diff.identical:
        return True
    return policy == "numerical" and diff.kind == "numerical"


def _piece(p: str) -> str:
    text = repr(p)
    return text if len(text) <= PIECE_WIDTH else text[: PIECE_WIDTH - 1] + "…"


def _lp(trace: TokenTrace, i: int) -> str:
    if i >= len(trace):
        return ""
    x = float(trace.logprobs[i])
    return f"{x:.3f}" if math.isfinite(x) else "–"


def _alternatives(trace: TokenTrace | None, i: int) -> str:
    if trace is None or i >= len(trace) or not trace.has_top[i]:
        return "none reported (an accepted draft token, or no logprobs)"
    pairs = sorted(
        (
            (float(lp), trace.top_pieces[i][j] if j < len(trace.top_pieces[i]) else f"#{trace.top_ids[i, j]}")
            for j, lp in enumerate(trace.top_logprobs[i])
            if math.isfinite(lp)
        ),
        reverse=True,
    )
    return " | ".join(f"{_piece(p)} {lp:.3f}" for lp, p in pairs)


def _token_table(base: TokenTrace, cand: TokenTrace, pos: int) -> list[str]:
    w = PIECE_WIDTH + 2
    lines = [f"      {'token':>6}  {'baseline':<{w}}{'logprob':>8}   {'candidate':<{w}}{'logprob':>8}"]
    for i in range(max(0, pos - BEFORE), max(len(base), len(cand), pos + 1)):
        if i > pos + AFTER:
            break
        b = _piece(base.pieces[i]) if i < len(base) else "(ended)"
        c = _piece(cand.pieces[i]) if i < len(cand) else "(ended)"
        mark = ">>" if i == pos else "  "
        lines.append(f"    {mark}{i:>6}  {b:<{w}}{_lp(base, i):>8}   {c:<{w}}{_lp(cand, i):>8}")
    return lines


def _verdict_line(diff: SampleDiff, thresholds: Thresholds, policy: Policy) -> str:
    gap = gap_text(diff) if math.isfinite(diff.gap) else "unknown"
    margin = f"{diff.margin:.3g} nats" if math.isfinite(diff.margin) else "unknown"
    if diff.kind == "confident":
        return (
            f"LOSSY: confident divergence: the candidate chose a token {gap} below the baseline's own "
            f"(the baseline's top two were {margin} apart), above the {thresholds.effective:.3g}-nat threshold "
            f"({thresholds.source})."
        )
    if diff.kind == "unknown":
        return (
            "UNDETERMINED: divergence without logprobs at that token, and no control run diverged there, so numerics cannot "
            "be told from a lossy drafter; request top_logprobs or add a control run."
        )
    how = f"explained by {diff.explained_by}" if diff.explained_by else "numerical"
    return (
        f"NUMERICAL-ONLY: numerical divergence ({how}; the tokens chosen {gap} apart, threshold {thresholds.effective:.3g}), "
        f"which the {policy} policy does not allow; use --evalsuite-policy numerical to let near-ties pass."
    )


def _answers(cand: Grade | None, base: Grade | None) -> str | None:
    if cand is None or base is None:
        return None
    return f"answers: baseline {base.extracted!r} ({base.status}), candidate {cand.extracted!r} ({cand.status})"


def failure_message(
    diff: SampleDiff,
    base: Completion,
    cand: Completion,
    thresholds: Thresholds,
    policy: Policy,
    *,
    task: str = "",
    base_grade: Grade | None = None,
    cand_grade: Grade | None = None,
) -> str:
    """The aligned tokens around the first divergence, both arms' alternatives there, the margin and the answers."""
    pos = diff.first_divergence or 0
    unit = "character" if diff.level == "text" else "token"
    name = f"{task}/{diff.sample_id}" if task else diff.sample_id
    lines = [
        f"{name}: the candidate's output diverges from the baseline at {unit} {pos} "
        f"(baseline {diff.baseline_length}, candidate {diff.candidate_length} {unit}s; compared by {diff.level}).",
        _verdict_line(diff, thresholds, policy),
        "",
    ]
    bt, ct = base.tokens, cand.tokens
    if diff.level != "text" and bt is not None and ct is not None:
        lines += _token_table(bt, ct, pos)
        lines += [
            "",
            f"    baseline alternatives at {pos}:  {_alternatives(bt, pos)}",
            f"    candidate alternatives at {pos}: {_alternatives(ct, pos)}",
        ]
        if diff.candidate_rank is not None:
            lines.append(
                f"    the candidate's token was the baseline's choice #{diff.candidate_rank} "
                f"(logprob {diff.candidate_logprob:.3f})"
            )
        elif diff.ended is None:
            lines.append("    the candidate's token is not among the baseline's reported alternatives")
    else:
        lines += [
            f"    before:    {diff.context!r}",
            f"    baseline:  {diff.baseline_next!r}",
            f"    candidate: {diff.candidate_next!r}",
        ]
    if diff.ended:
        lines.append(f"    the {diff.ended} output ended at {unit} {pos}")
    answers = _answers(cand_grade, base_grade)
    if answers:
        flipped = " (correctness flipped)" if diff.correctness_flipped else ""
        lines += ["", answers + flipped]
    return "\n".join(lines)
