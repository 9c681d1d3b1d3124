"""One way to turn the suite's records into JSON-ready data.

Every stored or reported record (dataclasses, pydantic models, numpy values, enums, paths) goes
through `to_jsonable`, so there is one rule for what a number looks like on disk: NaN and the
infinities become `null`, because JSON has no spelling for them and readers in other languages
reject the non-standard `NaN` token. A record that needs derived fields or renamed keys says so
with a `__json__` method returning plain data, which is then cleaned by the same rule.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np
from pydantic import BaseModel


def finite(x: float | int | None) -> float | None:
    """`x` as a float, or None when it is missing, NaN or infinite."""
    if x is None or isinstance(x, bool):
        return None if x is None else float(x)
    value = float(x)
    return value if math.isfinite(value) else None


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data (dict, list, str, int, float, bool, None) for any record of the suite."""
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    custom = getattr(obj, "__json__", None)
    if custom is not None and not isinstance(obj, type):
        return to_jsonable(custom())
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, BaseModel):
        return to_jsonable(obj.model_dump(mode="python"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON: {obj!r:.80}")


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` of `to_jsonable(obj)`; refuses NaN so nothing non-standard reaches a file."""
    return json.dumps(to_jsonable(obj), allow_nan=False, **kwargs)
