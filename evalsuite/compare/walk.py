"""One pass over a comparison's runs, one sample at a time: what `compare_runs` needs, never a whole run in memory.

For each sample id the pass reads every run's result (ids only where the
store allows; see `store.tokens.StoredTrace`), diffs the candidate and each
control against the baseline, tallies the baseline's logit resolution and
each run's request speeds, and keeps of the result only a shell (no text, no
tokens) for the counts taken later (accuracy, truncation).  A divergence at
the id level is diffed again with the two samples' token strings read, for
its readable window.  The figures are those of the whole runs at once: the
same diffs in the same (sorted) order, the speeds in each run's own order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from evalsuite.collector import collections_paused
from evalsuite.diff.align import SampleDiff, diff_completions
from evalsuite.diff.resolution import ResolutionTally
from evalsuite.heap import keep_freed_memory
from evalsuite.records import Completion, Grade, SampleResult
from evalsuite.speed import RequestSpeed, request_speed
from evalsuite.store.lean import StoredTrace
from evalsuite.store.reader import RunReader, named_at


@dataclass
class Walk:
    """What one pass over the runs gathered: per role, shells and request speeds; the diffs; the resolution."""

    shells: dict[str, dict[str, SampleResult]] = field(default_factory=dict)
    requests: dict[str, dict[str, RequestSpeed]] = field(default_factory=dict)
    diffs: list[SampleDiff] = field(default_factory=list)
    control_diffs: dict[str, list[SampleDiff]] = field(default_factory=dict)
    resolution: ResolutionTally = field(default_factory=ResolutionTally)


def shell(result: SampleResult) -> SampleResult:
    """A result without its text and tokens: its identity, strata, finish reason and usage."""
    c = result.completion
    return replace(result, completion=replace(c, text="", tokens=None, reasoning=None, answer=None))


def walk_runs(
    runs: Mapping[str, RunReader],
    ids: Mapping[str, list[str]],
    cand_grades: Mapping[str, Grade],
    base_grades: Mapping[str, Grade],
) -> Walk:
    """Read every sample of `runs` (role -> run; `ids`: role -> its result ids, in its order) once."""
    keep_freed_memory()  # each sample's arrays reuse the memory the last one freed (heap.py)
    walk = Walk(control_diffs={role: [] for role in runs if role not in ("candidate", "baseline")})
    present = {role: set(role_ids) for role, role_ids in ids.items()}
    for sid in sorted(set().union(*present.values())):
        with collections_paused():  # a sample's tokens are read, diffed and dropped: no cycle holds them
            _walk_sample(walk, sid, runs, present, cand_grades, base_grades)
    for role, role_ids in ids.items():  # each run's own order, as its speed figures were always summed
        walk.shells[role] = {s: walk.shells[role][s] for s in role_ids if s in walk.shells.get(role, {})}
        walk.requests[role] = {s: walk.requests[role][s] for s in role_ids if s in walk.requests.get(role, {})}
    return walk


def _walk_sample(
    walk: Walk,
    sid: str,
    runs: Mapping[str, RunReader],
    present: Mapping[str, set[str]],
    cand_grades: Mapping[str, Grade],
    base_grades: Mapping[str, Grade],
) -> None:
    """One sample of `walk_runs`: every run's result read, tallied and diffed."""
    loaded = {role: run.result(sid, strings="none") for role, run in runs.items() if sid in present[role]}
    for role, result in loaded.items():
        if result is not None:
            walk.shells.setdefault(role, {})[sid] = shell(result)
            walk.requests.setdefault(role, {})[sid] = request_speed(sid, result.completion)
    base = loaded.get("baseline")
    if base is None:
        return
    walk.resolution.add(base.completion.tokens)
    for role, diffs in walk.control_diffs.items():
        other = loaded.get(role)
        if other is not None:
            diffs.append(diff_against_baseline(sid, runs, role, other, base))
    cand = loaded.get("candidate")
    if cand is not None:
        grades = {"candidate_grade": cand_grades.get(sid), "baseline_grade": base_grades.get(sid)}
        walk.diffs.append(diff_against_baseline(sid, runs, "candidate", cand, base, **grades))


def diff_against_baseline(
    sid: str,
    runs: Mapping[str, RunReader],
    role: str,
    other: SampleResult,
    base: SampleResult,
    **grades: Grade | None,
) -> SampleDiff:
    """One run's diff against the baseline (the candidate's, or a control's: both judged alike); at a divergence
    again with the token strings it reads there: at the id level both outputs' pieces (its readable window), and
    wherever the baseline's alternatives there have no ids (no ids at all, or ids for the chosen tokens alone)
    their strings, which find the other run's token among them by name."""
    diff = diff_completions(sid, other.completion, base.completion, **grades)
    if diff.identical or diff.level == "text":
        return diff
    if diff.level == "strings":
        named = named_at(runs["baseline"], sid, base.completion, diff.first_divergence)
        return diff_completions(sid, other.completion, named, **grades)
    other_pieces = _with_pieces(runs[role], other)
    base_pieces = _with_pieces(runs["baseline"], base)
    if _ranked_by_name(base_pieces, diff):
        base_pieces = named_at(runs["baseline"], sid, base_pieces, diff.first_divergence)
    elif _ranked_by_name(other_pieces, diff):  # the baseline lists nothing there: the other run's own alternatives
        other_pieces = named_at(runs[role], sid, other_pieces, diff.first_divergence)
    return diff_completions(sid, other_pieces, base_pieces, **grades)


def _with_pieces(run: RunReader, result: SampleResult) -> Completion:
    """A result read with its ids only, with its tokens' strings: from its lean trace where that can read them
    (the columns the diff read are not read again), else the result read again."""
    trace = result.completion.tokens
    if isinstance(trace, StoredTrace):
        return replace(result.completion, tokens=trace.with_strings())
    again = run.result(result.sample_id, strings="pieces")
    assert again is not None
    return again.completion


def _ranked_by_name(completion: Completion, diff: SampleDiff) -> bool:
    """Whether the diff ranks the candidate's token among these alternatives by name: they have no ids there."""
    trace, i = completion.tokens, diff.first_divergence
    if trace is None or i is None or i >= len(trace) or not trace.has_top[i]:
        return False
    return not (trace.top_ids[i] >= 0).any()
