"""One reader protocol for runs, stored or in memory: what every stage after generation reads.

Compare, report, gate and speed take a `RunReader`; the run store implements
it, and so does `MemoryRun` (a run held in memory, for recordings and tests),
with the same signatures, so no caller needs to ask what kind of run it holds.
`result` reads one sample, so a comparison holds one sample of each run at a
time, never a whole run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evalsuite.records import Completion, Grade, Sample, SampleResult
from evalsuite.store.codec import Strings
from evalsuite.store.manifest import RunManifest, as_manifest


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

    def result_ids(self) -> list[str]:
        """The ids of the samples with a result."""
        ...

    def result(self, sample_id: str, *, strings: Strings = "all") -> SampleResult | None:
        """One sample's result, or None: how a comparison reads a run, one sample at a time."""
        ...

    def top_names(self, sample_id: str, position: int, top_ids: np.ndarray) -> list[str]:
        """One token's top-k strings, as `result(sample_id).completion.tokens.top_pieces[position]`, without
        reading the other tokens' (`top_ids`: the sample's top-k ids, as a result read without strings has)."""
        ...

    def grades(self) -> dict[str, Grade]: ...

    def samples(self) -> dict[str, Sample]: ...

    def sessions(self) -> list[dict[str, Any]]: ...


def named_at(run: RunReader, sample_id: str, completion: Completion, position: int | None) -> Completion:
    """The completion with its alternatives' strings at one token, read alone (`RunReader.top_names`) where it
    was read without them: what a diff ranks by name, and what a report's viewer shows."""
    trace = completion.tokens
    if trace is None or trace.top_pieces or position is None or position >= len(trace):
        return completion
    named = trace.named_at(position, run.top_names(sample_id, position, trace.top_ids))
    return replace(completion, tokens=named)


class MemoryRun:
    """A run held in memory: a manifest (typed, or its plain-data form of any known version) and its records.

    Token strings are already in memory, so `strings` changes nothing here;
    `ids` restricts results as it does for a stored run.
    """

    def __init__(
        self,
        manifest: RunManifest | Mapping[str, Any],
        results: Mapping[str, SampleResult],
        grades: Mapping[str, Grade] | None = None,
        samples: Mapping[str, Sample] | None = None,
        sessions: list[dict[str, Any]] | None = None,
        folder: Path | None = None,
    ):
        self.manifest = as_manifest(manifest, "the in-memory manifest")
        self.stored_results = dict(results)
        self.stored_grades = dict(grades or {})
        self.stored_samples = dict(samples or {})
        self.stored_sessions = list(sessions or [])
        self.folder = folder

    def results(self, *, strings: Strings = "all", ids: Iterable[str] | None = None) -> dict[str, SampleResult]:
        if ids is None:
            return dict(self.stored_results)
        wanted = set(ids)
        return {sid: r for sid, r in self.stored_results.items() if sid in wanted}

    def result_ids(self) -> list[str]:
        return list(self.stored_results)

    def result(self, sample_id: str, *, strings: Strings = "all") -> SampleResult | None:
        return self.stored_results.get(sample_id)

    def top_names(self, sample_id: str, position: int, top_ids: np.ndarray) -> list[str]:
        result = self.stored_results.get(sample_id)
        rows = result.completion.tokens.top_pieces if result is not None and result.completion.tokens else []
        return rows[position] if position < len(rows) else []

    def grades(self) -> dict[str, Grade]:
        return dict(self.stored_grades)

    def samples(self) -> dict[str, Sample]:
        return dict(self.stored_samples)

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.stored_sessions)
