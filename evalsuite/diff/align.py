"""Align a candidate completion with its baseline and describe the first divergence.

Greedy decoding makes outputs comparable position by position: once two
outputs differ they continue from different prefixes, so only the first
divergence carries information.  The comparison uses the best detail both
engines gave: token ids, else token strings (exact bytes when present), else
the text character by character.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from evalsuite.diff.resolution import step_at
from evalsuite.records import Completion, Grade, TokenLevel, TokenTrace

Kind = Literal["identical", "numerical", "confident", "unknown"]
Ended = Literal["baseline", "candidate"]

_PREFIX_TOKENS = 12
_NEXT_TOKENS = 4
_PREFIX_CHARS = 60
_NEXT_CHARS = 24


@dataclass(frozen=True)
class SampleDiff:
    """How one candidate output differs from the baseline's.

    Positions are token indices at the `ids` and `strings` levels and
    character indices at the `text` level.

    `gap` is the evidence a divergence is judged on: the baseline's logprob of
    its own token minus its logprob of the candidate's token (nats), so a
    candidate that picks a token the baseline put far below its own is caught
    even where the baseline's top two were close.  When the candidate's token
    is not among the baseline's listed alternatives the gap is a lower bound
    (`gap_bound`): the baseline's token minus its last listed alternative.
    `gap_source` says whose logprobs gave it: the baseline's, or, where the
    baseline lists nothing at that token, the candidate's own (its token
    against the baseline's).  `grid_step` is the grid step that trace's
    logits showed there, read from its other alternatives, never from the gap
    being judged (0 for none, NaN when it cannot be judged).

    `margin` is the baseline's top-1 minus top-2 logprob at the divergence,
    shown beside the gap (`margin_source` as for the gap).  `kind` is set by
    `evalsuite.diff.classify`.
    """

    sample_id: str
    level: TokenLevel
    identical: bool
    first_divergence: int | None
    common_prefix: int
    baseline_length: int
    candidate_length: int
    char_offset: int | None = None
    context: str = ""
    baseline_next: str = ""
    candidate_next: str = ""
    baseline_token_id: int | None = None
    candidate_token_id: int | None = None
    margin: float = math.nan
    margin_source: str | None = None
    gap: float = math.nan
    gap_bound: bool = False
    gap_source: str | None = None
    grid_step: float = math.nan
    baseline_logprob: float = math.nan
    candidate_rank: int | None = None
    candidate_logprob: float = math.nan
    ended: Ended | None = None
    answer_changed: bool | None = None
    correctness_flipped: bool | None = None
    kind: Kind | None = None
    explained_by: str | None = None

    @property
    def window(self) -> str:
        """One readable line: the text before the divergence, then both continuations."""
        if self.identical:
            return ""
        return f"…{self.context}[baseline: {self.baseline_next!r} | candidate: {self.candidate_next!r}]"


def _level(cand: Completion, base: Completion) -> TokenLevel:
    ct, bt = cand.tokens, base.tokens
    if ct is None or bt is None or (len(ct) == 0 and len(bt) == 0):
        return "text"
    if len(ct) and not ct.has_pieces and not ct.has_ids:
        return "text"
    ids_ok = (len(ct) == 0 or ct.has_ids) and (len(bt) == 0 or bt.has_ids)
    return "ids" if ids_ok else "strings"


def _first_mismatch_tokens(a: TokenTrace, b: TokenTrace) -> int | None:
    """The first token where two outputs without ids differ: told apart by their exact bytes where both gave
    every token's, else by their strings (bytes on one side only would differ where the tokens do not).
    Outputs read as streams are compared joined; lists of strings as lists, which costs less than joining."""
    exact = a.exact_bytes and b.exact_bytes
    if a.streamed or b.streamed:
        return _first_mismatch_joined(a.joined(exact), b.joined(exact))
    return _first_mismatch_seq(a.raw, b.raw) if exact else _first_mismatch_seq(a.pieces, b.pieces)


_RUN = 256
"""Tokens compared a slice at a time (in C) before the one slice that differs is walked token by token."""


def _first_mismatch_seq(a: Sequence[object], b: Sequence[object]) -> int | None:
    """The first place two lists of tokens (strings or bytes) differ, or where the shorter ends; None if equal."""
    if a == b:
        return None
    n = min(len(a), len(b))
    start = 0
    while start < n and a[start : start + _RUN] == b[start : start + _RUN]:
        start += _RUN
    for i in range(start, min(start + _RUN, n)):
        if a[i] != b[i]:
            return i
    return n


def _first_mismatch_joined(a: tuple[bytes, np.ndarray], b: tuple[bytes, np.ndarray]) -> int | None:
    """`_first_mismatch_tokens` over joined tokens (`TokenTrace.joined`): before the first differing token both
    joins agree byte for byte and token end for token end, and that token is the first to break either."""
    (a_bytes, a_ends), (b_bytes, b_ends) = a, b
    if a_bytes == b_bytes and np.array_equal(a_ends, b_ends):
        return None
    n = min(len(a_ends), len(b_ends))
    moved = np.flatnonzero(a_ends[:n] != b_ends[:n])
    first_end = int(moved[0]) if len(moved) else n
    m = min(len(a_bytes), len(b_bytes))
    differs = np.frombuffer(a_bytes, np.uint8, m) != np.frombuffer(b_bytes, np.uint8, m)
    byte = int(differs.argmax()) if differs.any() else m
    return min(first_end, int(np.searchsorted(a_ends, byte, side="right")))


def _first_mismatch_ids(a: np.ndarray, b: np.ndarray) -> int | None:
    m = min(len(a), len(b))
    neq = np.flatnonzero(a[:m] != b[:m])
    if len(neq):
        return int(neq[0])
    return None if len(a) == len(b) else m


def _first_mismatch_text(a: str, b: str) -> int | None:
    if a == b:
        return None
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search on prefix equality: C-speed slices, O(n log n) worst case
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _margin_at(trace: TokenTrace, i: int) -> float:
    if i >= len(trace) or trace.top_logprobs.shape[1] < 2 or not trace.has_top[i]:
        return math.nan
    row = np.sort(trace.top_logprobs[i][np.isfinite(trace.top_logprobs[i])])[::-1]
    return float(row[0] - row[1]) if len(row) >= 2 else math.nan


def _column(owner: TokenTrace, other: TokenTrace, i: int, level: TokenLevel) -> tuple[int | None, bool]:
    """Where `other`'s token at `i` stands among `owner`'s alternatives there (None: not listed), and whether they
    could be searched at all: by id where the alternatives carry ids, else by string (vLLM gives ids for the
    chosen tokens alone, and a comparison reads the strings of one divergence's alternatives only)."""
    if level == "ids" and (owner.top_ids[i] >= 0).any():
        hits = np.flatnonzero(owner.top_ids[i] == other.ids[i])
        return (int(hits[0]) if len(hits) else None), True
    names = owner.top_pieces[i] if i < len(owner.top_pieces) else []
    if not names or not other.has_pieces:
        return None, False
    piece = other.text_of(i, i + 1)
    return next((j for j, name in enumerate(names) if name == piece), None), True


def _rank(trace: TokenTrace, i: int, column: int) -> int:
    order = np.argsort(-np.nan_to_num(trace.top_logprobs[i], nan=-np.inf), kind="stable")
    return int(np.flatnonzero(order == column)[0]) + 1


def _chosen_gap(owner: TokenTrace, other: TokenTrace, i: int, level: TokenLevel) -> tuple[float, bool, float]:
    """On `owner`'s side of a divergence at `i`: its logprob of its own token minus its logprob of `other`'s token
    there, whether that is only a lower bound, and the grid step its other alternatives show (see `step_at`).

    A token not listed among the alternatives lies at or below the last of them; where `other` ended at `i`
    its end is one of the alternatives below `owner`'s token, or none of them.  NaN where nothing tells.
    """
    if i >= len(owner) or not owner.has_top[i]:
        return math.nan, False, math.nan
    row = owner.top_logprobs[i].astype(np.float64)
    own = float(owner.logprobs[i])
    mine, _ = _column(owner, owner, i, level)
    rest = [j for j in np.flatnonzero(np.isfinite(row)).tolist() if j != mine]
    if i < len(other):
        theirs, searched = _column(owner, other, i, level)
        if theirs is not None:
            return own - float(row[theirs]), False, step_at(owner, i, judged=theirs)
        if not searched or not rest:
            return math.nan, False, math.nan
        return own - float(row[rest].min()), True, step_at(owner, i)
    if not rest:
        return math.nan, False, math.nan
    nearest = max(rest, key=lambda j: row[j])
    return own - float(row[nearest]), True, step_at(owner, i, judged=nearest)


def _grade_flags(cand: Grade | None, base: Grade | None) -> tuple[bool | None, bool | None]:
    if cand is None or base is None:
        return None, None
    changed = (cand.extracted or None) != (base.extracted or None)
    if cand.status == "ungraded" or base.status == "ungraded":
        return changed, None
    return changed, cand.correct != base.correct


def diff_completions(
    sample_id: str,
    candidate: Completion,
    baseline: Completion,
    *,
    candidate_grade: Grade | None = None,
    baseline_grade: Grade | None = None,
) -> SampleDiff:
    """Compare one candidate completion with the baseline's for the same sample."""
    level = _level(candidate, baseline)
    changed, flipped = _grade_flags(candidate_grade, baseline_grade)
    if level == "text":
        return _diff_text(sample_id, candidate.text, baseline.text, changed, flipped)
    ct, bt = candidate.tokens, baseline.tokens
    assert ct is not None and bt is not None
    if level == "ids":
        i = _first_mismatch_ids(bt.ids, ct.ids)
    else:
        i = _first_mismatch_tokens(bt, ct)
    if i is None:
        return SampleDiff(
            sample_id, level, True, None, len(bt), len(bt), len(ct), answer_changed=changed, correctness_flipped=flipped
        )
    margin, source = _margin_at(bt, i), "baseline"
    if math.isnan(margin):
        margin, source = _margin_at(ct, i), "candidate"
    (gap, bound, step), gap_source = _chosen_gap(bt, ct, i, level), "baseline"
    if math.isnan(gap):
        (gap, bound, step), gap_source = _chosen_gap(ct, bt, i, level), "candidate"
    column = _column(bt, ct, i, level)[0] if i < len(bt) and i < len(ct) and bt.has_top[i] else None
    ended: Ended | None = "baseline" if i >= len(bt) else "candidate" if i >= len(ct) else None
    return SampleDiff(
        sample_id=sample_id,
        level=level,
        identical=False,
        first_divergence=i,
        common_prefix=i,
        baseline_length=len(bt),
        candidate_length=len(ct),
        char_offset=len(bt.text_of(0, i)),
        context=bt.text_of(max(0, i - _PREFIX_TOKENS), i)[-_PREFIX_CHARS:],
        baseline_next=bt.text_of(i, i + _NEXT_TOKENS),
        candidate_next=ct.text_of(i, i + _NEXT_TOKENS),
        baseline_token_id=int(bt.ids[i]) if level == "ids" and i < len(bt) else None,
        candidate_token_id=int(ct.ids[i]) if level == "ids" and i < len(ct) else None,
        margin=margin,
        margin_source=None if math.isnan(margin) else source,
        gap=gap,
        gap_bound=bound,
        gap_source=None if math.isnan(gap) else gap_source,
        grid_step=step,
        baseline_logprob=float(bt.logprobs[i]) if i < len(bt) and bt.has_top[i] else math.nan,
        candidate_rank=None if column is None else _rank(bt, i, column),
        candidate_logprob=math.nan if column is None else float(bt.top_logprobs[i, column]),
        ended=ended,
        answer_changed=changed,
        correctness_flipped=flipped,
    )


def _diff_text(sample_id: str, cand: str, base: str, changed: bool | None, flipped: bool | None) -> SampleDiff:
    i = _first_mismatch_text(base, cand)
    if i is None:
        return SampleDiff(
            sample_id,
            "text",
            True,
            None,
            len(base),
            len(base),
            len(cand),
            answer_changed=changed,
            correctness_flipped=flipped,
        )
    return SampleDiff(
        sample_id=sample_id,
        level="text",
        identical=False,
        first_divergence=i,
        common_prefix=i,
        baseline_length=len(base),
        candidate_length=len(cand),
        char_offset=i,
        context=base[max(0, i - _PREFIX_CHARS) : i],
        baseline_next=base[i : i + _NEXT_CHARS],
        candidate_next=cand[i : i + _NEXT_CHARS],
        ended="baseline" if i >= len(base) else "candidate" if i >= len(cand) else None,
        answer_changed=changed,
        correctness_flipped=flipped,
    )


def diff_runs(
    candidate: Mapping[str, Completion],
    baseline: Mapping[str, Completion],
    *,
    candidate_grades: Mapping[str, Grade] | None = None,
    baseline_grades: Mapping[str, Grade] | None = None,
) -> list[SampleDiff]:
    """Diff every sample both runs answered, in sorted id order."""
    cg = candidate_grades or {}
    bg = baseline_grades or {}
    return [
        diff_completions(sid, candidate[sid], baseline[sid], candidate_grade=cg.get(sid), baseline_grade=bg.get(sid))
        for sid in sorted(candidate.keys() & baseline.keys())
    ]
