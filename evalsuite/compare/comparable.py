"""Are two runs comparable?  Fields that change what a correct engine must output have to match.

Candidate and baseline must share the task, the prompt template, the
generation parameters, the dataset identity and the model's identity; server
flags, speculative settings and builds are expected to differ and are
reported, not refused.  Fields are dotted paths into the manifest's
`fingerprint_fields`, compared leaf by leaf so the error names exactly what
differs (`params.max_tokens: 2048 vs 8192`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsuite.errors import NotComparableError
from evalsuite.store.manifest import RunManifest

MUST_MATCH: tuple[str, ...] = (
    "task",
    "prompt_template",
    "params",
    "dataset",
    "server.model",
    "server.model_meta",
)
_MISSING = "<absent>"


@dataclass(frozen=True)
class FieldDifference:
    """One leaf of the fingerprint fields that differs between two runs."""

    path: str
    baseline: Any
    other: Any

    def __str__(self) -> str:
        return f"{self.path}: baseline {self.baseline!r}, other {self.other!r}"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(value, tuple):
        value = list(value)
    return {prefix: value}


def field_differences(baseline: Mapping[str, Any], other: Mapping[str, Any]) -> list[FieldDifference]:
    """Every leaf path whose value differs (a path present on one side only counts as a difference)."""
    a, b = _flatten(baseline), _flatten(other)
    return [
        FieldDifference(path, a.get(path, _MISSING), b.get(path, _MISSING))
        for path in sorted(a.keys() | b.keys())
        if a.get(path, _MISSING) != b.get(path, _MISSING)
    ]


def _governed(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p + ".") for p in prefixes)


def _fields(label: str, manifest: RunManifest) -> dict[str, Any]:
    if manifest.fingerprint_fields is None:
        raise NotComparableError(
            f"The {label} run's manifest has no 'fingerprint_fields' mapping, so it cannot be checked "
            "for comparability; it was not written by `evalsuite run`."
        )
    return manifest.fingerprint_fields.as_mapping()


def _waive_hint(refused: Sequence[FieldDifference]) -> str:
    """How to waive these fields from the command line and from the config (not a Python argument)."""
    fields = sorted({".".join(d.path.split(".")[:2]) for d in refused})
    options = " ".join(f"--allow {f}" for f in fields)
    listed = ", ".join(f'"{f}"' for f in fields)
    return f"`{options}` on `evalsuite compare`/`report`, or allow_differences = [{listed}] in the candidate target's config"


def check_comparable(
    baseline_manifest: RunManifest,
    other_manifest: RunManifest,
    *,
    other_name: str = "candidate",
    must_match: Sequence[str] = MUST_MATCH,
    allow: Sequence[str] = (),
) -> list[FieldDifference]:
    """Raise NotComparableError listing every must-match field that differs; return the others (to report).

    `allow` waives must-match prefixes on purpose (say, comparing a quantized
    target with the full-precision baseline to measure the loss); waived
    differences are returned with the reported ones.
    """
    diffs = field_differences(_fields("baseline", baseline_manifest), _fields(other_name, other_manifest))
    refused = [d for d in diffs if _governed(d.path, must_match) and not _governed(d.path, allow)]
    if refused:
        lines = "\n".join(f"  - {d.path}: baseline {d.baseline!r}, {other_name} {d.other!r}" for d in refused)
        raise NotComparableError(
            f"The {other_name} run ({other_manifest.name}) and the baseline run ({baseline_manifest.name}) "
            f"differ in {len(refused)} field(s) that change outputs, so their outputs cannot be compared:\n{lines}\n"
            "Re-run one of them with matching settings, or, if the difference is deliberate, waive the field with "
            f"{_waive_hint(refused)}."
        )
    return diffs
