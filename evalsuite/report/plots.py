"""The report's plots as inline SVG: forest plot, accuracy per stratum, divergence positions, gaps, speed.

Each function takes plain numbers (no comparison objects) and returns SVG
markup, or None when there is nothing to draw, so the template can say so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup

from evalsuite.report.svg import PALETTE, Scale, Svg, nice_ticks

KINDS = ("numerical", "confident", "unknown")


@dataclass(frozen=True)
class IntervalRow:
    """One labelled estimate with its interval (proportions or differences, as fractions)."""

    label: str
    value: float
    low: float
    high: float
    note: str = ""


def forest(rows: Sequence[IntervalRow], delta: float, title: str) -> Markup | None:
    """Paired accuracy difference per row (points) with its 95 % interval, zero and the ±delta margin."""
    rows = [r for r in rows if math.isfinite(r.value)]
    if not rows:
        return None
    left, right, top, step = 170, 560, 28, 22
    height = top + step * len(rows) + 44
    bounds = [abs(v) for r in rows for v in (r.low, r.high, r.value) if math.isfinite(v)] + [delta * 1.5]
    span = max(bounds) * 100
    x = Scale(-span, span, left, right)
    svg = Svg(right + 20, height, title, "forest")
    svg.text(left, 14, title, size=12, weight="bold")
    svg.x_axis(x, height - 40, top - 6, "candidate minus baseline accuracy (points), 95 % interval")
    svg.line(x(0), top - 6, x(0), height - 40, PALETTE["axis"])
    for d in (-delta * 100, delta * 100):
        svg.line(x(d), top - 6, x(d), height - 40, PALETTE["confident"], 1, "4 3")
    for i, r in enumerate(rows):
        y = top + step * i + step / 2
        svg.text(left - 8, y + 4, r.label, "end", 11)
        if math.isfinite(r.low) and math.isfinite(r.high):
            svg.line(x(r.low * 100), y, x(r.high * 100), y, PALETTE["baseline"], 2)
        tip = f"{r.label}: {r.value * 100:+.1f} points [{r.low * 100:+.1f}, {r.high * 100:+.1f}] {r.note}"
        svg.circle(x(r.value * 100), y, 4, PALETTE["candidate"], tip)
    return svg.markup()


def accuracy_bars(groups: Sequence[tuple[str, IntervalRow, IntervalRow]], title: str) -> Markup | None:
    """Both arms' accuracy per stratum value (baseline, candidate) with Wilson 95 % whiskers."""
    if not groups:
        return None
    left, right, top, band = 170, 560, 34, 30
    height = top + band * len(groups) + 44
    x = Scale(0, 100, left, right)
    svg = Svg(right + 20, height, title, "accuracy")
    svg.text(left, 14, title, size=12, weight="bold")
    svg.legend(left, 28, [("baseline", PALETTE["baseline"]), ("candidate", PALETTE["candidate"])])
    svg.x_axis(x, height - 40, top, "accuracy (%)")
    for i, (label, base, cand) in enumerate(groups):
        y0 = top + band * i + 4
        svg.text(left - 8, y0 + 15, label, "end", 11)
        for j, (arm, row) in enumerate((("baseline", base), ("candidate", cand))):
            y = y0 + j * 11
            if not math.isfinite(row.value):
                continue
            svg.rect(
                left,
                y,
                x(row.value * 100) - left,
                10,
                PALETTE[arm],
                f"{arm} {label}: {row.value * 100:.1f} % [{row.low * 100:.1f}, {row.high * 100:.1f}] {row.note}",
            )
            if math.isfinite(row.low) and math.isfinite(row.high):
                svg.line(x(row.low * 100), y + 5, x(row.high * 100), y + 5, "#222", 1)
    return svg.markup()


def _stacked_histogram(
    values: dict[str, list[float]],
    edges: np.ndarray,
    title: str,
    kind: str,
    xlabel: str,
    tick_fmt=None,
    marker: tuple[float, str] | None = None,
) -> Markup:
    left, right, top, bottom = 56, 560, 34, 210
    counts = {k: np.histogram(v, bins=edges)[0] for k, v in values.items() if v}
    total = np.sum(list(counts.values()), axis=0)
    y = Scale(0, max(float(total.max()), 1.0), bottom, top)
    x = Scale(float(edges[0]), float(edges[-1]), left, right)
    svg = Svg(right + 20, bottom + 44, title, kind)
    svg.text(left, 14, title, size=12, weight="bold")
    svg.legend(left + 150, 28, [(k, PALETTE[k]) for k in counts])
    svg.y_axis(y, left, right, "samples", lambda v: f"{v:g}" if float(v).is_integer() else "")
    svg.x_axis(x, bottom, top, xlabel, **({"tick_fmt": tick_fmt} if tick_fmt else {}))
    stack = np.zeros(len(edges) - 1)
    for k, c in counts.items():
        for b, n in enumerate(c):
            if n:
                x0, x1 = x(edges[b]), x(edges[b + 1])
                svg.rect(
                    x0 + 0.5,
                    y(stack[b] + n),
                    x1 - x0 - 1,
                    y(stack[b]) - y(stack[b] + n),
                    PALETTE[k],
                    f"{k}: {n} in [{edges[b]:.3g}, {edges[b + 1]:.3g})",
                )
        stack += c
    if marker is not None:
        svg.line(x(marker[0]), top, x(marker[0]), bottom, PALETTE["confident"], 1.5, "5 3")
        svg.text(x(marker[0]) + 4, top + 10, marker[1], size=10, fill=PALETTE["confident"])
    return svg.markup()


def divergence_positions(positions: dict[str, list[int]], title: str, unit: str) -> Markup | None:
    """Histogram of first-divergence positions, stacked by kind."""
    values = {k: [float(p) for p in positions.get(k, [])] for k in KINDS}
    flat = [p for v in values.values() for p in v]
    if not flat:
        return None
    hi = max(flat) + 1
    ticks = nice_ticks(0, hi, 20)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    edges = np.arange(0, hi + step, max(step, 1.0))
    return _stacked_histogram(values, edges, title, "positions", f"first divergence ({unit} from the start)")


def gaps(values: dict[str, list[float]], threshold: float, title: str) -> Markup | None:
    """Histogram of the gap between the two tokens chosen at each divergence (log scale), with the threshold."""
    logs = {k: [math.log10(max(m, 1e-4)) for m in values.get(k, []) if math.isfinite(m)] for k in KINDS}
    flat = [v for vs in logs.values() for v in vs]
    if not flat:
        return None
    lo = min(min(flat), math.log10(threshold)) - 0.25
    hi = max(max(flat), math.log10(threshold)) + 0.25
    edges = np.linspace(
        math.floor(lo * 4) / 4, math.ceil(hi * 4) / 4, 1 + int(round(math.ceil(hi * 4) - math.floor(lo * 4)))
    )
    return _stacked_histogram(
        logs,
        edges,
        title,
        "gaps",
        "the baseline's own token minus the candidate's (nats, log scale)",
        tick_fmt=lambda v: f"{10**v:.3g}",
        marker=(math.log10(threshold), f"threshold {threshold:.3g}"),
    )


def speed(
    arms: Sequence[tuple[str, str, float]], acceptance: Sequence[tuple[str, float, float]], title: str
) -> Markup | None:
    """Median decode tokens/s per arm, and draft acceptance rate (with mean accepted length) per speculative arm."""
    arms = [a for a in arms if math.isfinite(a[2])]
    if not arms:
        return None
    left, right, top, band = 170, 560, 30, 24
    acc = [a for a in acceptance if math.isfinite(a[1])]
    gap = 46 if acc else 0
    height = top + band * len(arms) + 40 + gap + band * len(acc) + (40 if acc else 0)
    svg = Svg(right + 20, height, title, "speed")
    svg.text(left, 14, title, size=12, weight="bold")
    x = Scale(0, max(a[2] for a in arms) * 1.1, left, right)
    axis_y = top + band * len(arms)
    svg.x_axis(x, axis_y, top - 4, "median decode tokens/s")
    for i, (name, role, tps) in enumerate(arms):
        y = top + band * i + 4
        svg.text(left - 8, y + 12, name, "end", 11)
        svg.rect(left, y, x(tps) - left, 16, PALETTE.get(role, PALETTE["control"]), f"{name}: {tps:.1f} tokens/s")
        svg.text(x(tps) + 4, y + 12, f"{tps:.0f}", size=10)
    if acc:
        top2 = axis_y + 40 + gap
        svg.text(left, top2 - 16, "draft acceptance rate (mean accepted length)", size=11, weight="bold")
        x2 = Scale(0, 100, left, right)
        for i, (name, rate, tau) in enumerate(acc):
            y = top2 + band * i
            svg.text(left - 8, y + 12, name, "end", 11)
            svg.rect(left, y, x2(rate * 100) - left, 16, PALETTE["candidate"], f"{name}: {rate * 100:.1f} % accepted")
            extra = f", tau {tau:.2f}" if math.isfinite(tau) else ""
            svg.text(x2(rate * 100) + 4, y + 12, f"{rate * 100:.0f} %{extra}", size=10)
        svg.x_axis(x2, top2 + band * len(acc), top2 - 4, "accepted / drafted tokens (%)")
    return svg.markup()
