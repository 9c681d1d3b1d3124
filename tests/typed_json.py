"""A comparable form of JSON values for tests that check two encoders or parsers agree."""

from __future__ import annotations

import math
from typing import Any


def typed(value: Any) -> Any:
    """`value` where 1 != 1.0 and NaN == NaN, so a value read back with another type shows up."""
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    return (type(value).__name__, value)
