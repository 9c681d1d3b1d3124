"""A very small SVG writer: scales, ticks and escaped shapes, enough for the report's plots.

Plots are drawn server-side into inline SVG so the HTML report needs no
plotting library, no network and no script to show them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from markupsafe import Markup, escape

PALETTE = {
    "baseline": "#4c72b0",
    "candidate": "#dd8452",
    "control": "#8c8c8c",
    "numerical": "#55a868",
    "confident": "#c44e52",
    "unknown": "#8172b3",
    "axis": "#555555",
    "grid": "#e5e5e5",
}


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else [0.0]
    raw = (high - low) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(low / step - 1e-9) * step
    ticks, t = [], start
    while t <= high + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


@dataclass(frozen=True)
class Scale:
    """Maps data [lo, hi] onto pixels [a, b]."""

    lo: float
    hi: float
    a: float
    b: float

    def __call__(self, v: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.a + (min(max(v, self.lo), self.hi) - self.lo) / span * (self.b - self.a)


def fmt_tick(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"


@dataclass
class Svg:
    """Accumulates shapes; `markup()` returns the element for a template (text already escaped)."""

    width: int
    height: int
    title: str
    kind: str
    parts: list[str] = field(default_factory=list)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, tip: str = "") -> None:
        tip_el = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
            f'fill="{fill}">{tip_el}</rect>'
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        stroke: str = PALETTE["axis"],
        width: float = 1,
        dash: str = "",
    ) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width}"{d}/>'
        )

    def circle(self, x: float, y: float, r: float, fill: str, tip: str = "") -> None:
        tip_el = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{fill}">{tip_el}</circle>')

    def text(
        self,
        x: float,
        y: float,
        s: str,
        anchor: str = "start",
        size: int = 11,
        fill: str = "#222",
        weight: str = "normal",
    ) -> None:
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'fill="{fill}" font-weight="{weight}">{escape(s)}</text>'
        )

    def x_axis(
        self, scale: Scale, y: float, top: float, label: str, ticks: list[float] | None = None, tick_fmt=fmt_tick
    ) -> None:
        for t in ticks if ticks is not None else nice_ticks(scale.lo, scale.hi):
            x = scale(t)
            self.line(x, top, x, y, PALETTE["grid"])
            self.text(x, y + 14, tick_fmt(t), "middle", 10, PALETTE["axis"])
        self.line(scale.a, y, scale.b, y)
        self.text((scale.a + scale.b) / 2, y + 30, label, "middle", 11, PALETTE["axis"])

    def y_axis(self, scale: Scale, x: float, right: float, label: str, tick_fmt=fmt_tick) -> None:
        for t in nice_ticks(min(scale.lo, scale.hi), max(scale.lo, scale.hi), 4):
            y = scale(t)
            self.line(x, y, right, y, PALETTE["grid"])
            self.text(x - 4, y + 3, tick_fmt(t), "end", 10, PALETTE["axis"])
        self.line(x, scale.a, x, scale.b)
        self.parts.append(
            f'<text transform="translate({x - 36:.1f},{(scale.a + scale.b) / 2:.1f}) rotate(-90)" '
            f'text-anchor="middle" font-size="11" fill="{PALETTE["axis"]}">{escape(label)}</text>'
        )

    def legend(self, x: float, y: float, items: list[tuple[str, str]]) -> None:
        for i, (name, color) in enumerate(items):
            self.rect(x + i * 110, y - 9, 10, 10, color)
            self.text(x + i * 110 + 14, y, name, size=10)

    def markup(self) -> Markup:
        body = "".join(self.parts)
        return Markup(
            f'<svg class="plot" data-plot="{escape(self.kind)}" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'viewBox="0 0 {self.width} {self.height}" width="{self.width}" height="{self.height}">'
            f"<title>{escape(self.title)}</title>{body}</svg>"
        )
