"""Graders: turn a completion's text into a Grade (correct / incorrect / ungraded).

Each grader is named in a task spec (`grader.name`) and found by that name
in the `evalsuite.graders` entry-point group (`evalsuite.plugins`), where an
outside package registers its own grader class the same way evalsuite does:

    [project.entry-points."evalsuite.graders"]
    mygrader = "mypackage.grading:MyGrader"

The class is called with `extraction=[...]` and the spec's options as keyword
arguments, and must satisfy `Grader`.  A grader scores a whole batch so it can
choose its own parallelism (worker processes for math, the sandbox pool for code).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from evalsuite import plugins
from evalsuite.errors import ConfigError
from evalsuite.records import Grade, Sample
from evalsuite.tasks.schema import GraderSpec


@dataclass(frozen=True)
class GradeInput:
    """What a grader sees: the sample (with its reference) and the model's text."""

    sample: Sample
    text: str
    truncated: bool = False


class Grader(Protocol):
    """Scores completions.  `version` changes whenever scores could change.

    A grader may also define `grading_key(item) -> JSON-able value`: everything
    its grade of `item` depends on (the code grader: the tests and the
    extracted program).  The grade cache (`evalsuite.graders.cache`) reuses a
    grade for every item with the same key; without the method the key is
    the whole sample (less its id) and the answer text.  And `ready()`:
    check, before any generation, that this machine can grade at all
    (raising an `EvalsuiteError` that says why not).
    """

    name: str
    version: str

    def grade_batch(self, items: Sequence[GradeInput], *, workers: int | None = None) -> list[Grade]:
        """One Grade per item, in order; never raises for a single bad sample."""
        ...


def grader_names() -> list[str]:
    """The graders every installed package registers, by name."""
    return plugins.names(plugins.GRADERS)


def get_grader(spec: GraderSpec) -> Grader:
    """Instantiate the grader a task spec names, with its extraction pipeline and options."""
    try:
        cls = plugins.load(plugins.GRADERS, spec.name, "grader")
    except plugins.PluginError as exc:
        raise ConfigError(str(exc)) from None
    grader: Grader = cls(extraction=list(spec.extraction), **spec.options)
    return grader
