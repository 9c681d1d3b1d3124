"""Write a speed run: `speed.json` (the figures), `measurements.jsonl` (every request), `report.md` and `report.html`.

The Markdown and the HTML show the same numbers as the JSON: the paired
speedup per input length and per concurrency with its interval (plotted in
the HTML), the per-cell figures, the outliers and the notes on what the
server's context and slots allowed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from evalsuite.speedrun.client import Measurement
from evalsuite.speedrun.plots import Point, speedup_plot
from evalsuite.speedrun.session import TURN_PREFIX, parting_sentence


@dataclass(frozen=True)
class SpeedPaths:
    folder: Path
    json: Path
    measurements: Path
    markdown: Path
    html: Path


def _f(x: Any, digits: int = 1) -> str:
    return f"{x:,.{digits}f}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def _ms(x: Any) -> str:
    return f"{x * 1000:,.1f}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def _ratio(d: dict[str, Any]) -> str:
    if d.get("geometric_mean") is None:
        return "-"
    iv = f" [{_f(d['low95'], 2)}, {_f(d['high95'], 2)}]" if d.get("low95") is not None else ""
    return f"{d['geometric_mean']:.2f}x{iv}"


def speedup_rows(summary: dict[str, Any]) -> list[list[str]]:
    head = [
        "workload",
        "concurrency",
        "input tokens",
        "pairs",
        "decode speedup [95 %]",
        "latency speedup [95 %]",
        "TTFT ratio [95 %]",
        "left out",
    ]
    rows = [head]
    for s in summary["speedups"]:
        rows.append(
            [
                s["workload"],
                str(s["concurrency"]),
                _f(s["input_tokens"], 0),
                str(s["decode"]["n"]),
                _ratio(s["decode"]),
                _ratio(s["latency"]),
                _ratio(s["ttft"]),
                str(s["excluded"]),
            ]
        )
    return rows


def cell_rows(summary: dict[str, Any]) -> list[list[str]]:
    head = [
        "workload",
        "conc.",
        "arm",
        "n (outliers)",
        "input tok",
        "output tok",
        "tokens/s p50 (p90)",
        "system tokens/s",
        "TTFT ms p50/p90/p99",
        "ITL ms p50/p90/p99",
        "chunk gap ms p50/p90/p99",
        "acceptance",
        "tau",
        "client/engine",
    ]
    rows = [head]
    for c in summary["cells"]:
        t, i, g = c["ttft_s"], c["itl_s"], c["chunk_gap_s"]
        rows.append(
            [
                c["workload"],
                str(c["concurrency"]),
                c["arm"],
                f"{c['n']} ({c['outliers']})",
                _f(c["prompt_tokens"], 0),
                _f(c["output_tokens"], 0),
                f"{_f(c['tokens_per_s'])} (p90 {_f(c['tokens_per_s_pct']['p90'])})",
                _f(c["system_tokens_per_s"]),
                "/".join(_ms(t[k]) for k in ("p50", "p90", "p99")),
                "/".join(_ms(i[k]) for k in ("p50", "p90", "p99")),
                "/".join(_ms(g[k]) for k in ("p50", "p90", "p99")),
                f"{c['acceptance'] * 100:.1f} %" if c["acceptance"] is not None else "-",
                _f(c["mean_accepted_length"], 2),
                _f(c["client_over_engine"], 4),
            ]
        )
    return rows


def session_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The session's turns: context, both arms' decode speed, the paired speedup, drafting, identity of the answers."""
    head = [
        "turn",
        "input tokens",
        "baseline tokens/s",
        "candidate tokens/s",
        "decode speedup [95 %]",
        "acceptance",
        "tau",
    ]
    rows = [head]
    cells = {(c["workload"], c["arm"]): c for c in summary["cells"] if c["concurrency"] == 1}
    for s in summary["speedups"]:
        if not s["workload"].startswith(TURN_PREFIX):
            continue
        base, cand = cells.get((s["workload"], "baseline"), {}), cells.get((s["workload"], "candidate"), {})
        rows.append(
            [
                s["workload"][len(TURN_PREFIX) :],
                _f(s["input_tokens"], 0),
                _f(base.get("tokens_per_s")),
                _f(cand.get("tokens_per_s")),
                _ratio(s["decode"]),
                _pct(cand.get("acceptance")),
                _f(cand.get("mean_accepted_length"), 2),
            ]
        )
    return rows


def _pct(x: Any) -> str:
    return f"{x * 100:.1f} %" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def _session_lines(summary: dict[str, Any]) -> list[str]:
    session, plan = summary.get("session"), summary["plan"].get("session")
    if not session or not plan:
        return []
    return [
        f"Session '{plan['name']}' ({plan['turns']} turns, {plan['source']}): every turn holds the earlier turns and "
        "that arm's own answers; greedy identity is judged turn by turn.",
        *[parting_sentence(p) for p in session["parting"]],
    ]


def _overall(summary: dict[str, Any]) -> str:
    o = summary.get("overall") or {}
    if not o or not o["decode"]["n"]:
        return "Overall: no pair was measured."
    return (
        f"Overall decode speedup {_ratio(o['decode'])} over {o['decode']['n']} pairs ({o['definition']}); "
        f"acceptance {_pct(o['acceptance'])}, tau {_f(o['mean_accepted_length'], 2)}."
    )


def _memory(s: dict[str, Any]) -> str:
    if s.get("peak_memory_mb") is None:
        return f"memory {s.get('memory') or 'not measured'}"
    gpu = f", GPU {_f(s['gpu_memory_mb'], 0)} MiB" if s.get("gpu_memory_mb") is not None else ""
    return f"peak memory {_f(s['peak_memory_mb'], 0)} MiB{gpu}"


def md_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(r.replace("|", "\\|") for r in row) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * len(rows[0]))
    return "\n".join(lines)


def html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in r) + "</tr>" for r in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _title(summary: dict[str, Any]) -> str:
    s = summary["servers"]
    return f"Speed: {s['candidate']['target']} vs {s['baseline']['target']}"


def _facts(summary: dict[str, Any]) -> list[str]:
    p = summary["plan"]
    facts = [
        f"Tokens/s: {summary['definition']}",
        f"Speedup: {summary['speedup_definition']}.",
        f"Outliers: {summary['outlier_rule']}; listed below, left out of every figure.",
        f"Design: {p['warmup']} warm-up requests per arm, then {p['reps']} repetitions with baseline and "
        f"candidate interleaved on identical prompts (order alternating); {p['output_tokens']} output tokens "
        f"(ignore_eos) on the length workloads; input lengths {p['lengths_run']}, concurrency "
        f"{p['concurrency_run']} at {p['sweep_length_run']} input tokens; the tasks workload stops where the "
        f"model stops.",
    ]
    facts += [f"Note: {n}." for n in summary["notes"]]
    for role, s in summary["servers"].items():
        facts.append(
            f"{role}: {s['target']} ({s['dialect']}, model {s['model']}, context {s.get('n_ctx')}, "
            f"slots {s.get('slots')}, {_memory(s)})"
        )
    return [_overall(summary), *facts]


def _outliers(summary: dict[str, Any]) -> list[str]:
    return [
        f"{o['arm']} {o['workload']} c={o['concurrency']} rep {o['rep']} slot {o['slot']}: "
        f"{_f(o['tokens_per_s'])} tokens/s against a cell median of {_f(o['cell_median'])}"
        for o in summary["outliers"]
    ] + [f"failed: {f['arm']} {f['workload']} rep {f['rep']}: {f['error']}" for f in summary["failed"]]


def speedup_point(s: dict[str, Any], x: float, label: str) -> Point:
    """A plot point for one row of `summary["speedups"]`: its decode speedup and interval at `x`."""
    d = s["decode"]
    return (
        x,
        d["geometric_mean"] or math.nan,
        d["low95"] or math.nan,
        d["high95"] or math.nan,
        f"{label}: {_ratio(d)}",
    )


def length_points(summary: dict[str, Any], turns: bool = False) -> list[Point]:
    """Decode speedup against input tokens: the length workloads at concurrency 1, or the session's turns."""
    return [
        speedup_point(s, s["input_tokens"] or 0, s["workload"])
        for s in summary["speedups"]
        if (
            s["workload"].startswith(TURN_PREFIX)
            if turns
            else s["workload"].startswith("in-") and s["concurrency"] == 1
        )
    ]


def plots(summary: dict[str, Any]) -> dict[str, Markup | None]:
    sweep = summary["plan"]["sweep_length_run"]
    conc = [
        speedup_point(s, float(s["concurrency"]), f"concurrency {s['concurrency']}")
        for s in summary["speedups"]
        if s["workload"] == f"in-{sweep}"
    ]
    return {
        "length": speedup_plot(
            length_points(summary), "decode speedup against input length (concurrency 1)", "input tokens", "length"
        ),
        "session": speedup_plot(
            length_points(summary, turns=True),
            "decode speedup per session turn (its context)",
            "input tokens",
            "session",
        ),
        "concurrency": speedup_plot(
            conc, f"decode speedup against concurrency ({sweep} input tokens)", "concurrent requests", "concurrency"
        ),
    }


def render_markdown(summary: dict[str, Any]) -> str:
    parts = [
        f"# {_title(summary)}",
        "",
        *[f"- {f}" for f in _facts(summary)],
        "",
        "## Paired speedup",
        "",
        md_table(speedup_rows(summary)),
        "",
        "## Per workload and arm",
        "",
        md_table(cell_rows(summary)),
        "",
    ]
    if len(session_rows(summary)) > 1:
        parts += ["## Multi-turn session", "", *[f"- {line}" for line in _session_lines(summary)], ""]
        parts += [md_table(session_rows(summary)), ""]
    out = _outliers(summary)
    parts += ["## Outliers and failures", ""] + ([f"- {o}" for o in out] if out else ["None."]) + [""]
    return "\n".join(parts)


def render_html(summary: dict[str, Any]) -> str:
    figs = "".join(f"<figure>{p}</figure>" for p in plots(summary).values() if p is not None)
    out = _outliers(summary)
    outs = "<ul>" + "".join(f"<li>{escape(o)}</li>" for o in out) + "</ul>" if out else "<p>None.</p>"
    facts = "".join(f"<li>{escape(f)}</li>" for f in _facts(summary))
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f4f4f4}"
        "figure{display:inline-block;margin:0 1em 1em 0}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(_title(summary))}</title>"
        f"<style>{style}</style></head><body><h1>{escape(_title(summary))}</h1><ul>{facts}</ul>"
        f"<h2>Paired speedup</h2><div class='plots'>{figs}</div>{html_table(speedup_rows(summary))}"
        f"{_session_html(summary)}"
        f"<h2>Per workload and arm</h2>{html_table(cell_rows(summary))}<h2>Outliers and failures</h2>{outs}"
        f"<script type='application/json' id='speed-data'>{escape(json.dumps(summary))}</script></body></html>"
    )


def _session_html(summary: dict[str, Any]) -> str:
    rows = session_rows(summary)
    if len(rows) < 2:
        return ""
    lines = "".join(f"<li>{escape(line)}</li>" for line in _session_lines(summary))
    return f"<h2>Multi-turn session</h2><ul>{lines}</ul>{html_table(rows)}"


def write_speed_report(summary: dict[str, Any], measurements: list[Measurement], folder: Path) -> SpeedPaths:
    """Write the four files into `folder` (which exists)."""
    paths = SpeedPaths(
        folder, folder / "speed.json", folder / "measurements.jsonl", folder / "report.md", folder / "report.html"
    )
    paths.json.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    with paths.measurements.open("w", encoding="utf-8") as fh:
        for m in measurements:
            fh.write(json.dumps(m.as_dict(), allow_nan=True) + "\n")
    paths.markdown.write_text(render_markdown(summary), encoding="utf-8")
    paths.html.write_text(render_html(summary), encoding="utf-8")
    return paths
