"""Render the report model to Markdown and to one self-contained HTML file.

Templates are package files (`templates/*.j2`) rendered with StrictUndefined,
so a misspelt field fails loudly instead of printing nothing; the HTML
environment autoescapes.  CSS and JS are package files inlined into the page,
and the viewer's data is inlined as JSON with `<`, `>` and `&` escaped so no
model output can close the script element.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

import evalsuite
from evalsuite.report import fmt, plots
from evalsuite.report.model import TaskReport, overall_tone
from evalsuite.report.plots import IntervalRow
from evalsuite.report.samples import viewer_samples
from evalsuite.serialize import dumps

PREFERRED_STRATA = ("subject", "difficulty", "platform", "level")


def _md_cell(value: Any) -> str:
    """Text safe inside a GitHub table cell: pipes escaped, newlines flattened."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _md_code(value: Any) -> str:
    text = str(value).replace("\n", " ")
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def _html_code_spans(value: Any) -> Markup:
    """Escaped text with its Markdown `code` spans as <code> elements, so one note serves both renderings."""
    parts = str(value).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no spans to trust
        return Markup.escape(str(value))
    return Markup("").join(Markup("<code>%s</code>") % p if i % 2 else Markup.escape(p) for i, p in enumerate(parts))


@lru_cache(maxsize=2)
def _env(kind: str) -> Environment:
    env = Environment(
        loader=PackageLoader("evalsuite.report", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        cell=_md_cell,
        code=_md_code,
        code_spans=_html_code_spans,
        pct=fmt.pct,
        pts=fmt.pts,
        num=fmt.num,
        gap=lambda d: fmt.gap(d.gap, d.gap_bound, d.gap_source),
        fixed=fmt.fixed,
    )
    return env


def _static(name: str) -> str:
    return resources.files("evalsuite.report").joinpath("static", name).read_text(encoding="utf-8")


def _json_for_script(data: Any) -> Markup:
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError):  # a NaN or a numpy number: the one serializer handles both (slower, so only then)
        text = dumps(data, ensure_ascii=False, separators=(",", ":"))
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))


def _interval(label: str, value: float, iv: Any, note: str = "") -> IntervalRow:
    return IntervalRow(label, value, iv.low, iv.high, note)


def _bars_stratum(t: TaskReport) -> str | None:
    keys = [r["stratum"] for r in t.accuracy if not r["overall"]]
    return next((k for k in PREFERRED_STRATA if k in keys), keys[0] if keys else None)


def task_plots(t: TaskReport) -> dict[str, Markup | None]:
    """Every plot of one task, as inline SVG (None where there is no data)."""
    c = t.comparison
    delta = c.overall()[0].verdict.delta if c.overall() else float(c.settings.get("delta", 0.02) or 0.02)
    forest_rows = [_interval(r["label"], r["raw"].difference, r["raw"].interval95, r["verdict"]) for r in t.accuracy]
    key = _bars_stratum(t)
    groups = [
        (
            r["value"],
            _interval("baseline", r["raw"].baseline.accuracy, r["raw"].baseline.wilson),
            _interval("candidate", r["raw"].candidate.accuracy, r["raw"].candidate.wilson),
        )
        for r in t.accuracy
        if r["stratum"] == key
    ]
    div = [d for d in c.diffs if not d.identical]
    positions = {
        k: [d.first_divergence for d in div if d.kind == k and d.first_divergence is not None] for k in plots.KINDS
    }
    gaps = {k: [d.gap for d in div if d.kind == k] for k in plots.KINDS}
    arms = [(f"{s.target} ({role})", role, s.median_tokens_per_s) for role, s in t.speeds.items()]
    acceptance = [
        (f"{s.target} ({role})", s.acceptance_rate, s.mean_accepted_length)
        for role, s in t.speeds.items()
        if role != "baseline"
    ]
    return {
        "forest": plots.forest(
            forest_rows, delta, f"{t.task}: accuracy difference (±{delta * 100:g}-point margin dashed)"
        ),
        "accuracy": plots.accuracy_bars(groups, f"{t.task}: accuracy per {key}") if key else None,
        "positions": plots.divergence_positions(
            positions, f"{t.task}: where outputs first diverge", t.divergence["unit"]
        ),
        "gaps": plots.gaps(gaps, c.thresholds.effective, f"{t.task}: gap between the tokens chosen at the divergence"),
        "speed": plots.speed(arms, acceptance, f"{t.task}: decode speed") if arms else None,
    }


def _context(tasks: Sequence[TaskReport], created: float) -> dict[str, Any]:
    return {
        "tasks": tasks,
        "tone": overall_tone(list(tasks)),
        "created": fmt.when(created),
        "version": evalsuite.__version__,
        "title": ", ".join(
            f"{t.task}: {t.comparison.candidate.get('target', '?')} vs {t.comparison.baseline.get('target', '?')}"
            for t in tasks
        ),
    }


def render_markdown(tasks: Sequence[TaskReport], created: float) -> str:
    return _env("md").get_template("report.md.j2").render(**_context(tasks, created))


def render_html(tasks: Sequence[TaskReport], created: float) -> str:
    samples = [s for t in tasks for s in viewer_samples(t.task, t.comparison.diffs, t.arms)]
    strata = sorted({f"{k}={v}" for s in samples for k, v in s["strata"].items()})
    data = {
        "samples": samples,
        "tasks": [t.task for t in tasks],
        "strata": strata,
        "thresholds": {t.task: t.comparison.thresholds.effective for t in tasks},
    }
    return (
        _env("html")
        .get_template("report.html.j2")
        .render(
            **_context(tasks, created),
            plots={t.task: task_plots(t) for t in tasks},
            css=Markup(_static("report.css")),
            js=Markup(_static("report.js")),
            data=_json_for_script(data),
            n_samples=len(samples),
        )
    )
