"""The leaderboard's files: `leaderboard.md`, a self-contained `leaderboard.html` (inline SVG plots, no script
needed to read it) and `leaderboard.csv` (one row per configuration), and one stdout line per row."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from evalsuite.errors import writing
from evalsuite.grid import value_text
from evalsuite.leaderboard.rows import Row
from evalsuite.report.fmt import fixed, pct, pts
from evalsuite.serialize import to_jsonable
from evalsuite.speedrun.plots import Point, speedup_lines
from evalsuite.speedrun.report import html_table, length_points, md_table
from evalsuite.textfile import write_text

CSV_COLUMNS = (
    "rank",
    "target",
    "verdict",
    "accuracy",
    "accuracy_delta",
    "baseline_accuracy",
    "candidate_accuracy",
    "samples",
    "speedup",
    "speedup_low",
    "speedup_high",
    "pairs",
    "acceptance",
    "tau",
    "peak_memory_mb",
    "gpu_memory_mb",
    "session",
    "grid",
)


@dataclass(frozen=True)
class LeaderboardPaths:
    folder: Path
    markdown: Path
    html: Path
    csv: Path


def _speedup(r: Row) -> str:
    if not math.isfinite(r.speedup):
        return "-"
    iv = f" [{r.speedup_low:.2f}, {r.speedup_high:.2f}]" if math.isfinite(r.speedup_low) else ""
    return f"{r.speedup:.2f}x{iv}"


def _memory(r: Row) -> str:
    gpu = f" (GPU {fixed(r.gpu_memory_mb, 0)})" if math.isfinite(r.gpu_memory_mb) else ""
    return f"{fixed(r.peak_memory_mb, 0)}{gpu}"


def _verdict_cell(r: Row) -> str:
    reason = r.unranked_reason()
    if r.baseline:
        return "baseline (reference)"
    return r.verdict if reason in (None, r.verdict) else f"{r.verdict}; {reason}"


def summary_line(r: Row) -> str:
    """One line per row for stdout: place, name, verdict, accuracy change, speedup, drafting, memory."""
    place = f"{r.rank:>3d}." if r.rank is not None else "  -."
    if r.baseline:
        return f"{place} {r.target}  baseline  speedup 1.00x  peak memory {_memory(r)} MiB"
    reason = r.unranked_reason()
    verdict = r.verdict if reason is None else f"{r.verdict} (not ranked: {reason})"
    accuracy = f"accuracy {pts(r.accuracy_delta)} pts ({r.accuracy or 'not graded'})"
    spec = f"acceptance {pct(r.acceptance)}, tau {fixed(r.tau, 2)}"
    session = f"  session {r.session}" if r.session else ""
    return (
        f"{place} {r.target}  {verdict}  {accuracy}  speedup {_speedup(r)}  {spec}  "
        f"peak memory {_memory(r)} MiB{session}"
    )


def table(rows: Sequence[Row]) -> list[list[str]]:
    head = [
        "rank",
        "configuration",
        "verdict",
        "accuracy change (points)",
        "decode speedup [95 %]",
        "acceptance",
        "tau",
        "peak memory MiB",
        "session",
    ]
    out = [head]
    for r in rows:
        out.append(
            [
                str(r.rank) if r.rank is not None else "-",
                r.target,
                _verdict_cell(r),
                "" if r.baseline else f"{pts(r.accuracy_delta)} ({r.accuracy or 'not graded'})",
                _speedup(r),
                pct(r.acceptance),
                fixed(r.tau, 2),
                _memory(r),
                r.session or "-",
            ]
        )
    return out


def csv_text(rows: Sequence[Row]) -> str:
    """Every row, ranked ones first; numbers as plain decimals (empty where not measured)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        record = {**to_jsonable(r), "rank": r.rank, "grid": ";".join(f"{k}={value_text(v)}" for k, v in r.grid.items())}
        writer.writerow(["" if record.get(c) is None else record[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def _label(r: Row) -> str:
    return r.target if r.unranked_reason() is None else f"{r.target} ({r.unranked_reason()})"


def plots(rows: Sequence[Row]) -> dict[str, Markup | None]:
    """Speedup against acceptance (one point per configuration), and against context length (one line each)."""
    candidates = [r for r in rows if not r.baseline]
    acceptance: list[tuple[str, list[Point]]] = [
        (
            _label(r),
            [(r.acceptance * 100, r.speedup, r.speedup_low, r.speedup_high, f"{pct(r.acceptance)}: {_speedup(r)}")],
        )
        for r in candidates
        if math.isfinite(r.acceptance)
    ]
    lengths = [(_label(r), length_points(r.speed)) for r in candidates if r.speed]
    turns = [(_label(r), length_points(r.speed, turns=True)) for r in candidates if r.speed]
    return {
        "acceptance": speedup_lines(
            acceptance,
            "decode speedup against draft acceptance",
            "accepted drafted tokens (%)",
            "acceptance",
            log_x=False,
            join=False,
        ),  # fmt: skip
        "context": speedup_lines(
            lengths, "decode speedup against input length (concurrency 1)", "input tokens", "context"
        ),
        "session": speedup_lines(turns, "decode speedup per session turn (its context)", "input tokens", "session"),
    }


def _facts(meta: dict[str, Any]) -> list[str]:
    return [str(f) for f in meta.get("facts", [])]


def render_markdown(ranked: Sequence[Row], apart: Sequence[Row], meta: dict[str, Any]) -> str:
    parts = [f"# Leaderboard: {len(ranked) + len(apart) - 1} configurations against {meta['baseline']}", ""]
    parts += [f"- {f}" for f in _facts(meta)] + [""]
    parts += ["## Ranked: lossless, fastest first", "", md_table(table(ranked)), ""]
    if apart:
        parts += ["## Not ranked", "", md_table(table(apart)), ""]
    parts += ["## Per task", ""]
    for r in [*ranked, *apart]:
        for task, line in r.tasks.items():
            parts.append(f"- {r.target} / {task}: {line}")
        if r.folder:
            parts.append(f"- {r.target}: reports in `{r.folder}/`")
    return "\n".join(parts) + "\n"


def render_html(ranked: Sequence[Row], apart: Sequence[Row], meta: dict[str, Any]) -> str:
    title = f"Leaderboard: {len(ranked) + len(apart) - 1} configurations against {meta['baseline']}"
    facts = "".join(f"<li>{escape(f)}</li>" for f in _facts(meta))
    figs = "".join(f"<figure>{p}</figure>" for p in plots([*ranked, *apart]).values() if p is not None)
    tasks = "".join(
        f"<li>{escape(r.target)} / {escape(task)}: {escape(line)}</li>"
        for r in [*ranked, *apart]
        for task, line in r.tasks.items()
    )
    links = "".join(
        f"<li><a href='{escape(r.folder)}/accuracy/report.html'>{escape(r.target)}: accuracy report</a>, "
        f"<a href='{escape(r.folder)}/speed/report.html'>speed report</a></li>"
        for r in [*ranked, *apart]
        if r.folder
    )
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f4f4f4}"
        "td:nth-child(2){text-align:left}figure{display:inline-block;margin:0 1em 1em 0}"
    )
    apart_html = f"<h2>Not ranked</h2>{html_table(table(apart))}" if apart else ""
    data = json.dumps({"meta": meta, "rows": to_jsonable([*ranked, *apart])})
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title><style>{style}</style>"
        f"</head><body><h1>{escape(title)}</h1><ul>{facts}</ul><h2>Ranked: lossless, fastest first</h2>"
        f"{html_table(table(ranked))}{apart_html}<h2>Plots</h2><div class='plots'>{figs}</div>"
        f"<h2>Per task</h2><ul>{tasks}</ul><h2>Reports</h2><ul>{links}</ul>"
        f"<script type='application/json' id='leaderboard-data'>{escape(data)}</script></body></html>"
    )


def write_leaderboard(
    folder: Path, ranked: Sequence[Row], apart: Sequence[Row], meta: dict[str, Any]
) -> LeaderboardPaths:
    """Write the three files into `folder` (which exists)."""
    paths = LeaderboardPaths(folder, folder / "leaderboard.md", folder / "leaderboard.html", folder / "leaderboard.csv")
    with writing(folder, "write the leaderboard into"):
        write_text(paths.markdown, render_markdown(ranked, apart, meta))
        write_text(paths.html, render_html(ranked, apart, meta))
        write_text(paths.csv, csv_text([*ranked, *apart]))
    return paths
