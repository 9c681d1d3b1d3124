"""Helpers shared by the grader tests: where the full datasets live, GradeInput builders."""

from __future__ import annotations

import os
from pathlib import Path

from evalsuite.graders import GradeInput
from evalsuite.records import Sample

REPO = Path(__file__).resolve().parents[2]


def shared_data() -> Path:
    """The development copy of the full datasets (env EVALSUITE_SHARED_DATA overrides)."""
    override = os.environ.get("EVALSUITE_SHARED_DATA")
    return Path(override) if override else (REPO / ".." / "shared" / "data").resolve()


def item(reference: object, text: str, *, sid: str = "s", truncated: bool = False, problem: str = "") -> GradeInput:
    """A GradeInput for a bare reference and response (`problem` becomes the user message)."""
    messages = ({"role": "user", "content": problem},) if problem else ()
    return GradeInput(Sample(id=sid, task="t", messages=messages, reference=reference), text, truncated)
