"""One reader protocol for runs, stored or in memory: what every stage after generation reads.

Compare, report, gate and speed take a `RunReader`; the run store implements
it, and so does `MemoryRun` (a run held in memory, for recordings and tests),
with the same signatures, so no caller needs to ask what kind of run it holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evalsuite.records import Grade, Sample, SampleResult
from evalsuite.store.codec import Strings
from evalsuite.store.manifest import RunManifest


class RunReader(Protocol):
    """A run to read: its manifest, results, grades, prompts and generation sessions."""

    @property
    def manifest(self) -> RunManifest: ...

    @property
    def folder(self) -> Path | None:
        """The run folder, or None for a run that is not on disk."""
        ...

    def results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> dict[str, SampleResult]:
        """Results by sample id; `strings` may skip token strings a caller does not need, `ids` restricts."""
        ...

    def grades(self) -> dict[str, Grade]: ...

    def samples(self) -> dict[str, Sample]: ...

    def sessions(self) -> list[dict[str, Any]]: ...


@dataclass
class MemoryRun:
    """A run held in memory: a manifest (typed, or its plain-data form) and results, grades, samples, sessions.

    Token strings are already in memory, so `strings` changes nothing here.
    """

    manifest: RunManifest
    stored_results: dict[str, SampleResult]
    stored_grades: dict[str, Grade] = field(default_factory=dict)
    stored_samples: dict[str, Sample] = field(default_factory=dict)
    stored_sessions: list[dict[str, Any]] = field(default_factory=list)
    folder: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.manifest, RunManifest):
            self.manifest = RunManifest.load(self.manifest, "the in-memory run's manifest")

    def results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> dict[str, SampleResult]:
        if ids is None:
            return dict(self.stored_results)
        wanted = set(ids)
        return {sid: r for sid, r in self.stored_results.items() if sid in wanted}

    def grades(self) -> dict[str, Grade]:
        return dict(self.stored_grades)

    def samples(self) -> dict[str, Sample]:
        return dict(self.stored_samples)

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.stored_sessions)
