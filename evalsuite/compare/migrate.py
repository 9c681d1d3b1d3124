"""Stored `comparison.json` files of older schema versions, read as today's.

A comparison written by an older evalsuite keeps its verdicts: migrating renames what was renamed and fills
what a newer version adds, as far as the old file tells it, and never judges anything again.  What the old
file cannot tell is null (a control's largest gap: an old file kept its top-two margins only).  Versions:
see `evalsuite.compare.run.SCHEMA_VERSION`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalsuite.compare.run import SCHEMA_VERSION
from evalsuite.errors import StoreError

_KINDS = {"determinism": "repeat", "numerics": "control"}


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """Controls named by their roles; the Holm family and speed, unknown to version 1, are null."""
    for control in doc.get("controls", []):
        control["kind"] = _KINDS.get(control.get("kind"), control.get("kind"))
        control["name"] = ":".join([_KINDS.get(p, p) for p in str(control.get("name", "")).split(":", 1)])
    for divergence in doc.get("divergences", []):
        how = str(divergence.get("explained_by") or "")
        if how.startswith("control:"):
            kind, _, name = how.removeprefix("control:").partition(":")
            divergence["explained_by"] = f"control:{_KINDS.get(kind, kind)}:{name}"
    doc.setdefault("holm_family", None)
    doc.setdefault("speed", None)
    doc.setdefault("truncation", {})
    return doc


def _v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    """The baseline's logit grid was not measured: no resolution; no grid step at any divergence."""
    doc.get("token", {}).get("thresholds", {}).setdefault("resolution", None)
    for divergence in doc.get("divergences", []):
        divergence.setdefault("margin_step", None)
    return doc


def _gap(divergence: dict[str, Any]) -> float | None:
    """The gap between the tokens chosen, where the old file holds both of the baseline's logprobs."""
    own, other = divergence.get("baseline_logprob"), divergence.get("candidate_logprob")
    if isinstance(own, (int, float)) and isinstance(other, (int, float)) and math.isfinite(own - other):
        return float(own - other)
    return None


def _v3_to_v4(doc: dict[str, Any]) -> dict[str, Any]:
    """Divergences judged on the gap between the tokens chosen: each one's gap where the baseline's logprobs of
    both tokens were kept; the verdicts as they were judged then (on the top-two margin)."""
    for divergence in doc.get("divergences", []):
        gap = _gap(divergence)
        divergence["gap"], divergence["gap_bound"] = gap, False
        divergence["gap_source"] = None if gap is None else "baseline"
        divergence["grid_step"] = divergence.pop("margin_step", None)
        if divergence.get("explained_by") == "margin":
            divergence["explained_by"] = "near-tie"
    token = doc.get("token", {})
    gaps = [d["gap"] for d in doc.get("divergences", []) if d["gap"] is not None]
    token.pop("max_margin", None)
    token["max_gap"] = max(gaps) if gaps else None
    thresholds = token.get("thresholds", {})
    thresholds.setdefault("thin", False)
    resolution = thresholds.get("resolution")
    if isinstance(resolution, dict):
        resolution.pop("cap", None)
        resolution.update({"decimals": None, "tolerance": 1e-4, "unreadable": False, "alternatives": None})
    for control in doc.get("controls", []):
        control.pop("max_margin", None)
        control.pop("median_margin", None)
        control.update({"max_gap": None, "median_gap": None, "elsewhere": None, "flips": None, "max_gap_all": None})
    return doc


_HEADLINES = (("LOSSLESS within numerics: ", "NUMERICAL-ONLY: "), ("LOSSLESS: ", "IDENTICAL: "))
"""Version 4's headline words, and the token labels that replaced them (the labels the file already held)."""


def _v4_to_v5(doc: dict[str, Any]) -> dict[str, Any]:
    """The headline opens with the token verdict's label, the one word used everywhere else."""
    summary = doc.get("summary")
    if isinstance(summary, str):
        for old, new in _HEADLINES:
            if summary.startswith(old):
                doc["summary"] = new + summary.removeprefix(old)
                break
    return doc


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
}
"""Version N to N + 1, for every version before today's."""


def migrate(doc: dict[str, Any], source: str = "the comparison") -> dict[str, Any]:
    """An older comparison's JSON as today's version (a copy; the input is left as it is)."""
    version = doc.get("schema_version", 1)
    if not isinstance(version, int) or version < 1 or version > SCHEMA_VERSION:
        raise StoreError(
            f"{source} has comparison schema version {version!r}; this evalsuite reads versions 1 to "
            f"{SCHEMA_VERSION}. Compare the runs again with this version (`evalsuite report`), or upgrade evalsuite."
        )
    doc = json.loads(json.dumps(doc))
    for step in range(version, SCHEMA_VERSION):
        doc = MIGRATIONS[step](doc)
    doc["schema_version"] = SCHEMA_VERSION
    return doc


def read_comparison(path: str | Path) -> dict[str, Any]:
    """A stored `comparison.json`, of any version this evalsuite knows, as today's schema."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"Cannot read the comparison {path}: {exc}.") from None
    if not isinstance(doc, dict):
        raise StoreError(f"{path} is not a comparison: it holds no JSON object.")
    return migrate(doc, str(path))
