"""Speed plots as inline SVG: paired speedup (with its 95 % interval) against input length, concurrency, a turn's
context or draft acceptance, one series per configuration."""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup

from evalsuite.report.svg import PALETTE, Scale, Svg, nice_ticks

Point = tuple[float, float, float, float, str]
"""(x, speedup, low95, high95, tooltip)"""
Series = tuple[str, Sequence[Point]]
"""(label, points): one configuration's line; an empty label draws no legend."""

SERIES_COLOURS = ("#dd8452", "#4c72b0", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974")


def speedup_plot(points: Sequence[Point], title: str, xlabel: str, kind: str) -> Markup | None:
    """Speedup per x (log2 axis) with interval whiskers and the no-speedup line at 1."""
    return speedup_lines([("", points)], title, xlabel, kind)


def speedup_lines(
    series: Sequence[Series], title: str, xlabel: str, kind: str, *, log_x: bool = True, join: bool = True
) -> Markup | None:
    """One line (or, without `join`, labelled points) per series: speedup against x with interval whiskers, the
    no-speedup line at 1, and a legend when the series are named.  `log_x` puts x on a log2 axis (lengths,
    concurrency); otherwise x is linear (a proportion such as acceptance, in percent)."""
    drawn = [(label, [p for p in pts if _finite(p, log_x)]) for label, pts in series]
    drawn = [(label, pts) for label, pts in drawn if pts]
    if not drawn:
        return None
    named = any(label for label, _ in drawn)
    left, right, top, bottom = 60, 560, 30, 230
    xs = [_x(p[0], log_x) for _, pts in drawn for p in pts]
    lo_x, hi_x = min(xs), max(xs)
    pad = 1.0 if log_x else max((hi_x - lo_x) * 0.08, 2.0)
    if hi_x - lo_x < pad:
        lo_x, hi_x = lo_x - pad / 2, hi_x + pad / 2
    x = Scale(lo_x - (0.3 if log_x else pad / 2), hi_x + (0.3 if log_x else pad / 2), left, right)
    ys = [v for _, pts in drawn for p in pts for v in p[1:4] if math.isfinite(v)] + [1.0]
    y = Scale(min(ys) * 0.9, max(ys) * 1.1, bottom, top)
    legend_width = 190 if named else 0
    svg = Svg(right + 20 + legend_width, max(bottom + 46, top + 16 * len(drawn) + 20), title, kind)
    svg.text(left, 14, title, size=12, weight="bold")
    svg.y_axis(y, left, right, "speedup (x)")
    if log_x:
        ticks = [float(t) for t in range(math.floor(lo_x), math.ceil(hi_x) + 1)]
        svg.x_axis(x, bottom, top, xlabel, ticks=ticks, tick_fmt=lambda v: f"{2**v:g}")
    else:
        svg.x_axis(x, bottom, top, xlabel, ticks=nice_ticks(x.lo, x.hi))
    svg.line(left, y(1.0), right, y(1.0), PALETTE["confident"], 1, "4 3")
    for i, (label, pts) in enumerate(drawn):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)] if named else PALETTE["candidate"]
        whisker = colour if named else PALETTE["baseline"]
        prev = None
        for p in sorted(pts, key=lambda p: p[0]):
            cx, cy = x(_x(p[0], log_x)), y(p[1])
            if math.isfinite(p[2]) and math.isfinite(p[3]):
                svg.line(cx, y(p[2]), cx, y(p[3]), whisker, 2)
                svg.line(cx - 4, y(p[2]), cx + 4, y(p[2]), whisker, 2)
                svg.line(cx - 4, y(p[3]), cx + 4, y(p[3]), whisker, 2)
            if prev is not None and join:
                svg.line(prev[0], prev[1], cx, cy, colour, 1)
            svg.circle(cx, cy, 4, colour, f"{label}: {p[4]}" if label else p[4])
            if not named:
                svg.text(cx + 6, cy - 6, f"{p[1]:.2f}x", size=10)
            prev = (cx, cy)
        if named:
            ly = top + 16 * i + 6
            svg.rect(right + 24, ly - 8, 10, 10, colour)
            svg.text(right + 38, ly + 1, label, size=10)
    return svg.markup()


def _finite(p: Point, log_x: bool) -> bool:
    return math.isfinite(p[0]) and (p[0] > 0 or not log_x) and math.isfinite(p[1])


def _x(value: float, log_x: bool) -> float:
    return math.log2(value) if log_x else value
