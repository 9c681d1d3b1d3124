"""Data for the HTML side-by-side viewer: every divergent sample, cut to what a reader needs.

For each divergence the viewer shows the shared text before it, a window of
tokens (with logprobs) where the first differing token is marked, both arms'
top alternatives at that token, the continuations, the extracted answers and
the grades.  Both arms are read with their alternatives' strings at that
token only (`report.model.DetailResults`); an alternative a run did not name
is named from the sample's own tokens, where every id maps to one fixed
string.  Texts are clipped (`PREFIX_CHARS`, `TAIL_CHARS`) so a report of
thousands of long outputs stays a few megabytes; the run store keeps it all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from evalsuite.diff.align import SampleDiff
from evalsuite.heap import keep_freed_memory
from evalsuite.records import Completion, Grade, Sample, TokenTrace
from evalsuite.serialize import finite

BEFORE = 8
AFTER = 24
PREFIX_CHARS = 600
TAIL_CHARS = 800
PROMPT_CHARS = 500


def _lp(x: float) -> float | None:
    """A logprob for the viewer: 4 decimals, null when missing."""
    value = finite(x)
    return None if value is None else round(value, 4)


def _name_of(token_id: int, traces: tuple[TokenTrace, ...]) -> str:
    """A token id's text, found where the same sample's traces used or offered it (ids map to fixed strings)."""
    for t in traces:
        hit = np.flatnonzero(t.ids == token_id)
        if len(hit) and t.has_pieces:
            return t.text_of(int(hit[0]), int(hit[0]) + 1)
        if t.top_pieces:
            rows, cols = np.nonzero(t.top_ids == token_id)
            for r, c in zip(rows.tolist(), cols.tolist()):
                if c < len(t.top_pieces[r]):
                    return t.top_pieces[r][c]
    return f"#{token_id}"


def _alternatives(trace: TokenTrace, i: int, others: tuple[TokenTrace, ...]) -> list[list[Any]]:
    """Alternatives at i, best first; names come from the trace, else from the other traces of the sample."""
    if i >= len(trace) or not trace.has_top[i]:
        return []
    row = trace.top_logprobs[i]
    names = trace.top_pieces[i] if i < len(trace.top_pieces) else []
    order = np.argsort(-np.nan_to_num(row, nan=-np.inf), kind="stable")
    return [
        [names[j] if j < len(names) else _name_of(int(trace.top_ids[i, j]), others), _lp(row[j])]
        for j in order
        if math.isfinite(row[j])
    ]


def _arm_tokens(trace: TokenTrace, start: int, pos: int, other: TokenTrace) -> dict[str, Any]:
    end = min(len(trace), pos + AFTER)
    has_top = trace.has_top
    chips = [[trace.text_of(i, i + 1), _lp(trace.logprobs[i]), bool(has_top[i])] for i in range(start, end)]
    tail = trace.text_of(end, len(trace))
    return {
        "tokens": chips,
        "alternatives": _alternatives(trace, pos, (trace, other)),
        "tail": tail[:TAIL_CHARS],
        "clipped": max(0, len(tail) - TAIL_CHARS),
        "length": len(trace),
    }


def _arm_text(text: str, pos: int) -> dict[str, Any]:
    tail = text[pos:]
    return {
        "tokens": [],
        "alternatives": [],
        "tail": tail[:TAIL_CHARS],
        "clipped": max(0, len(tail) - TAIL_CHARS),
        "length": len(text),
    }


def _grade(g: Grade | None) -> dict[str, Any] | None:
    return None if g is None else {"status": g.status, "extracted": g.extracted, "reason": g.reason}


def _prompt(sample: Sample | None) -> str:
    if sample is None or not sample.messages:
        return ""
    text = str(sample.messages[-1].get("content", ""))
    return text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS] + " …"


def _from_diff_only(d: SampleDiff) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Without run stores the diff's own short context is all there is."""
    base = {"tokens": [], "alternatives": [], "tail": d.baseline_next, "clipped": 0, "length": d.baseline_length}
    cand = {"tokens": [], "alternatives": [], "tail": d.candidate_next, "clipped": 0, "length": d.candidate_length}
    return d.context, base, cand


def sample_view(
    d: SampleDiff,
    task: str,
    base: Completion | None,
    cand: Completion | None,
    grades: Mapping[str, Grade | None],
    sample: Sample | None,
    strata: Mapping[str, str],
) -> dict[str, Any]:
    """One divergent sample for the viewer."""
    pos = d.first_divergence or 0
    start = max(0, pos - BEFORE)
    if base is None or cand is None:
        before, b, c = _from_diff_only(d)
    elif d.level != "text" and base.tokens is not None and cand.tokens is not None:
        before = base.tokens.text_of(0, start)
        b, c = _arm_tokens(base.tokens, start, pos, cand.tokens), _arm_tokens(cand.tokens, start, pos, base.tokens)
    else:
        before = base.text[:pos]
        b, c = _arm_text(base.text, pos), _arm_text(cand.text, pos)
    prefix = before[-PREFIX_CHARS:]
    return {
        "key": f"{task}/{d.sample_id}",
        "id": d.sample_id,
        "task": task,
        "strata": dict(strata),
        "kind": d.kind,
        "explained_by": d.explained_by,
        "level": d.level,
        "pos": d.first_divergence,
        "start": start,
        "prefix": prefix,
        "prefix_clipped": len(before) - len(prefix),
        "margin": _lp(d.margin),
        "margin_source": d.margin_source,
        "gap": _lp(d.gap),
        "gap_bound": d.gap_bound,
        "gap_source": d.gap_source,
        "candidate_rank": d.candidate_rank,
        "ended": d.ended,
        "answer_changed": d.answer_changed,
        "flipped": d.correctness_flipped,
        "grades": {arm: _grade(g) for arm, g in grades.items()},
        "reference": None if sample is None else str(sample.reference)[:200],
        "prompt": _prompt(sample),
        "baseline": b,
        "candidate": c,
    }


def viewer_samples(task: str, diffs: list[SampleDiff], arms: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Viewer entries for every divergent sample of one task, in the comparison's order."""
    keep_freed_memory()  # each sample's arrays reuse the memory the last one freed (heap.py)
    base, cand = arms.get("baseline"), arms.get("candidate")
    out = []
    for d in diffs:
        if d.identical:
            continue
        b = base.results.get(d.sample_id) if base else None
        c = cand.results.get(d.sample_id) if cand else None
        grades = {
            "baseline": base.grades.get(d.sample_id) if base else None,
            "candidate": cand.grades.get(d.sample_id) if cand else None,
        }
        sample = (base.samples.get(d.sample_id) if base else None) or (cand.samples.get(d.sample_id) if cand else None)
        strata = b.strata if b is not None else (sample.strata if sample is not None else {})
        out.append(
            sample_view(d, task, b.completion if b else None, c.completion if c else None, grades, sample, strata)
        )
    return out
