"""Graders: turn a completion's text into a Grade (correct / incorrect / ungraded).

Each grader is named in a task spec (`grader.name`) and looked up here.  A
grader scores a whole batch so it can choose its own parallelism (worker
processes for math, the sandbox pool for code).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from evalsuite.errors import ConfigError
from evalsuite.records import Grade, Sample
from evalsuite.tasks.spec import GraderSpec


@dataclass(frozen=True)
class GradeInput:
    """What a grader sees: the sample (with its reference) and the model's text."""

    sample: Sample
    text: str
    truncated: bool = False


class Grader(Protocol):
    """Scores completions.  `version` changes whenever scores could change."""

    name: str
    version: str

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order; never raises for a single bad sample."""
        ...


_REGISTRY: dict[str, str] = {
    "math": "evalsuite.graders.math:MathGrader",
    "gsm8k": "evalsuite.graders.gsm8k:GSM8KGrader",
    "gsm8k_lmeval": "evalsuite.graders.gsm8k:LMEvalGSM8KGrader",
    "code": "evalsuite.graders.code:CodeGrader",
    "lmeval": "evalsuite.lmeval.grader:LMEvalGrader",
}


def get_grader(spec: GraderSpec) -> Grader:
    """Instantiate the grader a task spec names, with its extraction pipeline and options."""
    target = _REGISTRY.get(spec.name)
    if target is None:
        raise ConfigError(f"Unknown grader '{spec.name}'. Known graders: {', '.join(sorted(_REGISTRY))}.")
    module_name, cls_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(extraction=list(spec.extraction), **spec.options)
