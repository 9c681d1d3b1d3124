"""The one serializer: every record type the suite stores becomes valid, strict JSON."""

import dataclasses
import enum
import json
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from evalsuite.serialize import dumps, finite, to_jsonable


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Inner:
    x: float
    where: Path


@dataclasses.dataclass
class Outer:
    inner: Inner
    values: tuple[float, ...]
    colour: Colour
    counts: dict[int, np.int64]


class Model(BaseModel):
    name: str
    score: float


@dataclasses.dataclass
class Derived:
    a: float

    def __json__(self) -> dict[str, float]:
        return {"a": self.a, "double": self.a * 2}


def test_nested_records_become_plain_json() -> None:
    obj = Outer(Inner(math.nan, Path("/tmp/x")), (1.0, math.inf), Colour.RED, {3: np.int64(7)})
    assert to_jsonable(obj) == {
        "inner": {"x": None, "where": "/tmp/x"},
        "values": [1.0, None],
        "colour": "red",
        "counts": {"3": 7},
    }
    assert json.loads(dumps(obj))["counts"] == {"3": 7}


def test_models_numpy_and_custom_shapes() -> None:
    assert to_jsonable(Model(name="a", score=-math.inf)) == {"name": "a", "score": None}
    assert to_jsonable(np.array([0.5, np.nan])) == [0.5, None]
    assert to_jsonable(np.float32(0.25)) == 0.25
    assert to_jsonable(Derived(math.nan)) == {"a": None, "double": None}
    assert to_jsonable(Derived(1.5)) == {"a": 1.5, "double": 3.0}


def test_finite_and_refusal_of_unknown_types() -> None:
    assert finite(None) is None and finite(math.nan) is None and finite(2) == 2.0 and finite(True) == 1.0
    with pytest.raises(TypeError, match="cannot serialise object"):
        to_jsonable(object())
