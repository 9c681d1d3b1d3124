"""Speed-run plots as inline SVG: paired speedup (with its 95 % interval) against input length and concurrency."""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup

from evalsuite.report.svg import PALETTE, Scale, Svg

Point = tuple[float, float, float, float, str]
"""(x, speedup, low95, high95, tooltip)"""


def speedup_plot(points: Sequence[Point], title: str, xlabel: str, kind: str) -> Markup | None:
    """Speedup per x (log2 axis) with interval whiskers and the no-speedup line at 1."""
    pts = [p for p in points if math.isfinite(p[0]) and p[0] > 0 and math.isfinite(p[1])]
    if not pts:
        return None
    left, right, top, bottom = 60, 560, 30, 230
    xs = [math.log2(p[0]) for p in pts]
    lo_x, hi_x = min(xs), max(xs)
    if hi_x - lo_x < 1:
        lo_x, hi_x = lo_x - 0.5, hi_x + 0.5
    x = Scale(lo_x - 0.3, hi_x + 0.3, left, right)
    ys = [v for p in pts for v in p[1:4] if math.isfinite(v)] + [1.0]
    y = Scale(min(ys) * 0.9, max(ys) * 1.1, bottom, top)
    svg = Svg(right + 20, bottom + 46, title, kind)
    svg.text(left, 14, title, size=12, weight="bold")
    svg.y_axis(y, left, right, "speedup (x)")
    ticks = [t for t in range(math.floor(lo_x), math.ceil(hi_x) + 1)]
    svg.x_axis(x, bottom, top, xlabel, ticks=[float(t) for t in ticks], tick_fmt=lambda v: f"{2**v:g}")
    svg.line(left, y(1.0), right, y(1.0), PALETTE["confident"], 1, "4 3")
    prev = None
    for xv, p in sorted(zip(xs, pts)):
        cx, cy = x(xv), y(p[1])
        if math.isfinite(p[2]) and math.isfinite(p[3]):
            svg.line(cx, y(p[2]), cx, y(p[3]), PALETTE["baseline"], 2)
            svg.line(cx - 4, y(p[2]), cx + 4, y(p[2]), PALETTE["baseline"], 2)
            svg.line(cx - 4, y(p[3]), cx + 4, y(p[3]), PALETTE["baseline"], 2)
        if prev is not None:
            svg.line(prev[0], prev[1], cx, cy, PALETTE["candidate"], 1)
        svg.circle(cx, cy, 4, PALETTE["candidate"], p[4])
        svg.text(cx + 6, cy - 6, f"{p[1]:.2f}x", size=10)
        prev = (cx, cy)
    return svg.markup()
