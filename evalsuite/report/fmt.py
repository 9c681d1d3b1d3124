"""Number formatting shared by the Markdown and HTML reports, so both print the same figures."""

from __future__ import annotations

import math
import time
from typing import Any

DASH = "–"


def ok(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def pct(x: Any, digits: int = 1) -> str:
    return f"{float(x) * 100:.{digits}f} %" if ok(x) else DASH


def pts(x: Any) -> str:
    """A difference of proportions in percentage points, signed."""
    return f"{float(x) * 100:+.1f}" if ok(x) else DASH


def interval_pct(low: Any, high: Any) -> str:
    return f"[{float(low) * 100:.1f}, {float(high) * 100:.1f}]" if ok(low) and ok(high) else DASH


def interval_pts(low: Any, high: Any) -> str:
    return f"[{float(low) * 100:+.1f}, {float(high) * 100:+.1f}]" if ok(low) and ok(high) else DASH


def pval(p: Any) -> str:
    if not ok(p):
        return DASH
    p = float(p)
    return "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def num(x: Any, digits: int = 3) -> str:
    return f"{float(x):.{digits}g}" if ok(x) else DASH


def gap(value: Any, bound: bool = False, source: str | None = None) -> str:
    """A divergence's gap between the tokens chosen: "≥ 2.3" for a lower bound, "(candidate)" where the
    candidate's logprobs gave it."""
    if not ok(value):
        return DASH
    return f"{'≥ ' if bound else ''}{num(value)}{' (candidate)' if source == 'candidate' else ''}"


def fixed(x: Any, digits: int = 1) -> str:
    return f"{float(x):,.{digits}f}" if ok(x) else DASH


def ratio(x: Any) -> str:
    return f"{float(x):.2f}×" if ok(x) else DASH


def seconds(x: Any) -> str:
    if not ok(x):
        return DASH
    x = float(x)
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def when(epoch: Any) -> str:
    if not ok(epoch):
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(epoch)))
