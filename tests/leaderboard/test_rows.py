"""The leaderboard's ranking and its CSV, on rows made by hand: what is ranked, in which order, and why not."""

from __future__ import annotations

import csv
import io
import math

from evalsuite.leaderboard import CSV_COLUMNS, Row
from evalsuite.leaderboard.render import csv_text, summary_line
from evalsuite.leaderboard.rows import BASELINE, rank, session_text


def _row(name: str, verdict: str, speedup: float, accuracy: str = "EQUIVALENT") -> Row:
    return Row(name, verdict, accuracy=accuracy, speedup=speedup, speedup_low=speedup - 0.1, speedup_high=speedup + 0.1)


def test_lossless_rows_are_ranked_by_speedup_and_the_rest_kept_apart_with_their_reason() -> None:
    rows = [
        Row("base", BASELINE, speedup=1.0),
        _row("slow", "IDENTICAL", 0.6),
        _row("fast", "NUMERICAL-ONLY", 1.7),
        _row("fake", "LOSSY", 3.0),  # the fastest, and lossy: never ranked
        _row("unsure", "UNDETERMINED", 2.0),
        _row("worse", "IDENTICAL", 2.5, accuracy="DIFFERENT"),
        _row("unmeasured", "IDENTICAL", math.nan),
    ]
    ranked, apart = rank(rows)
    assert [(r.target, r.rank) for r in ranked] == [("fast", 1), ("base", None), ("slow", 2)]
    assert [(r.target, r.unranked_reason()) for r in apart] == [
        ("fake", "LOSSY"),
        ("unsure", "UNDETERMINED"),
        ("worse", "accuracy DIFFERENT"),
        ("unmeasured", "speed not measured"),
    ]
    table = list(csv.DictReader(io.StringIO(csv_text([*ranked, *apart]))))
    assert tuple(table[0]) == CSV_COLUMNS
    assert [(r["target"], r["rank"], r["speedup"]) for r in table[:3]] == [
        ("fast", "1", "1.7"),
        ("base", "", "1.0"),
        ("slow", "2", "0.6"),
    ]
    assert table[-1]["speedup"] == "" and table[-1]["speedup_low"] == ""  # not measured: empty, not "nan"
    assert summary_line(ranked[0]).startswith("  1. fast  NUMERICAL-ONLY")
    assert "LOSSY (not ranked: LOSSY)" in summary_line(apart[0]) and "3.00x [2.90, 3.10]" in summary_line(apart[0])


def test_a_session_is_summed_up_by_the_earliest_turn_its_histories_part_at() -> None:
    assert session_text([]) == ""
    assert session_text([{"turn": None, "turns": 6}, {"turn": None, "turns": 6}]) == "identical, 6 turns"
    assert session_text([{"turn": 4, "turns": 6}, {"turn": 2, "turns": 6}]) == "part at turn 2"
