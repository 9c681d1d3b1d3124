"""Where each run came from (endpoint, server build and flags, model, dataset, parameters) and how to redo it."""

from __future__ import annotations

import shlex
from typing import Any, Mapping

from evalsuite.report import fmt

ROLE_ORDER = ("baseline", "determinism", "control", "candidate")


def _compact(value: Any) -> str:
    """A one-line `key=value, ...` rendering of a (nested) mapping; scalars as they are."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_compact(v)}" for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _server(fields: Mapping[str, Any], manifest: Mapping[str, Any]) -> tuple[str, str]:
    server = fields.get("server") or {}
    probe = manifest.get("probe") or {}
    model = server.get("model") or probe.get("model") or "?"
    build = server.get("build_info") or server.get("version") or probe.get("build_info") or probe.get("version") or "?"
    return str(model), str(build)


def run_provenance(role: str, manifest: Mapping[str, Any], folder: str = "") -> dict[str, Any]:
    """One row of the provenance table from a run manifest."""
    fields = manifest.get("fingerprint_fields") or {}
    endpoint = fields.get("endpoint") or {}
    model, build = _server(fields, manifest)
    args = manifest.get("server_args") or endpoint.get("server_args") or []
    engine = fields.get("engine") or {}
    return {
        "role": role,
        "target": str(manifest.get("target", "?")),
        "fingerprint": str(manifest.get("fingerprint", "?"))[:16],
        "created": fmt.when(manifest.get("created_at")),
        "endpoint": str(endpoint.get("base_url") or (f"rig:{endpoint['rig']}" if endpoint.get("rig") else "?")),
        "engine": _compact({"dialect": engine.get("dialect"), "api": engine.get("api")}) or "?",
        "model": model,
        "build": build,
        "server_args": " ".join(shlex.quote(str(a)) for a in args) if args else "",
        "params": _compact(fields.get("params") or {}),
        "dataset": _compact(fields.get("dataset") or {}),
        "suite_version": str(manifest.get("suite_version") or fields.get("suite_version") or "?"),
        "host": _compact(manifest.get("host") or {}),
        "folder": folder,
    }


def provenance(comparison: Any, arms: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows for every run in the report; without stores, the identities the comparison kept."""
    if arms:
        return [run_provenance(r, arms[r].manifest, arms[r].folder) for r in ROLE_ORDER if r in arms]
    return [run_provenance("baseline", comparison.baseline), run_provenance("candidate", comparison.candidate)]


def reproduce(comparison: Any, arms: Mapping[str, Any]) -> list[str]:
    """Shell commands that redo this comparison (runs are resumed from the store when they still exist)."""
    task = comparison.candidate.get("task") or comparison.baseline.get("task") or "TASK"
    target = comparison.candidate.get("target") or "TARGET"
    lines = [f"evalsuite eval {shlex.quote(str(target))} --task {shlex.quote(str(task))}"]
    folders = [arms[r].folder for r in ("candidate", "baseline", "control") if r in arms and arms[r].folder]
    if folders:
        lines.append("evalsuite report " + " ".join(shlex.quote(f) for f in folders))
    return lines
