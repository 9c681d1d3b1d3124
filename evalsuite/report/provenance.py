"""Where each run came from (endpoint, server build and flags, model, dataset, parameters) and how to redo it."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalsuite.compare.roles import SHOWN_ORDER
from evalsuite.report import fmt
from evalsuite.report.sandboxing import level_cell
from evalsuite.store.manifest import FingerprintFields, RunManifest


def _compact(value: Any) -> str:
    """A one-line `key=value, ...` rendering of a (nested) mapping; scalars as they are."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_compact(v)}" for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _server(fields: FingerprintFields, manifest: RunManifest) -> tuple[str, str]:
    server, probe = fields.server, manifest.probe
    model = server.model or probe.model or "?"
    build = server.build_info or server.version or probe.build_info or probe.version or "?"
    return str(model), str(build)


def run_provenance(role: str, manifest: RunManifest, folder: str = "", sandbox: str = "") -> dict[str, Any]:
    """One row of the provenance table from a run manifest (and the sandbox level its code grades ran at)."""
    fields = manifest.fields
    endpoint = fields.endpoint
    model, build = _server(fields, manifest)
    args = manifest.server_args or endpoint.server_args or []
    return {
        "role": role,
        "target": manifest.target,
        "fingerprint": manifest.fingerprint[:16],
        "created": fmt.when(manifest.created_at),
        "endpoint": str(endpoint.base_url or (f"rig:{endpoint.rig}" if endpoint.rig else "?")),
        "engine": _compact({"dialect": fields.engine.dialect, "api": fields.engine.api}) or "?",
        "model": model,
        "build": build,
        "server_args": " ".join(shlex.quote(str(a)) for a in args) if args else "",
        "params": _compact(fields.params.as_mapping()),
        "dataset": _compact(fields.dataset.as_mapping()),
        "suite_version": str(manifest.suite_version or fields.suite_version or "?"),
        "host": _compact(manifest.host),
        "sandbox": sandbox,
        "folder": folder,
    }


def _identity(identity: Mapping[str, Any]) -> RunManifest:
    """The identity a comparison kept (fingerprint, target, task) as a manifest that knows nothing more."""
    fingerprint, target, task = (str(identity.get(k) or "?") for k in ("fingerprint", "target", "task"))
    return RunManifest(fingerprint=fingerprint, target=target, task=task)


def provenance(comparison: Any, arms: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows for every run in the report; without stores, the identities the comparison kept."""
    if arms:
        return [
            run_provenance(r, arms[r].manifest, arms[r].folder, level_cell(arms[r].grades))
            for r in SHOWN_ORDER
            if r in arms
        ]
    return [
        run_provenance("baseline", _identity(comparison.baseline)),
        run_provenance("candidate", _identity(comparison.candidate)),
    ]


def _path(folder: str) -> str:
    """An absolute folder, so a pasted line works from any directory."""
    try:
        return str(Path(folder).resolve())
    except OSError:
        return folder


def _folder(arms: Mapping[str, Any], role: str) -> str | None:
    arm = arms.get(role)
    return _path(arm.folder) if arm is not None and arm.folder else None


def _eval_line(comparison: Any, arms: Mapping[str, Any], task: str) -> str | None:
    """`evalsuite eval ...` when that command would redo exactly these runs: the candidate's configured roles match."""
    cand, base = arms.get("candidate"), arms.get("baseline")
    if cand is None or base is None:
        return None
    config = cand.manifest.target_config
    if config.baseline != base.manifest.target:
        return None
    control = arms.get("control")
    if (config.control or None) != (control.manifest.target if control is not None else None):
        return None
    fields = cand.manifest.fields
    words = ["evalsuite", "eval", str(comparison.candidate.get("target")), "--task", task]
    n = max(len(arm.samples) or _answered(comparison, role) for role, arm in arms.items())
    if n:
        words += ["--limit", str(n)]
    max_tokens = fields.params.max_tokens
    if isinstance(max_tokens, int) and max_tokens > 0:
        words += ["--max-tokens", str(max_tokens)]
    source = fields.dataset.source
    if source in ("hf", "fixture", "local"):
        words += ["--data", str(source)]
    words.append("--repeat-baseline" if "repeat" in arms else "--no-repeat-baseline")
    return " ".join(shlex.quote(w) for w in words)


def _answered(comparison: Any, role: str) -> int:
    """How many samples the role's run answered, counted by the comparison over all its results."""
    counted = comparison.truncation.get(role)
    return counted.n if counted is not None else 0


def reproduce(comparison: Any, arms: Mapping[str, Any]) -> list[str]:
    """Shell commands that redo this comparison, each working when pasted (from the project folder for `eval`).

    `evalsuite report` names every run's role explicitly, since roles belong
    to the comparison and not to the folders, and repeats the waived fields
    and the bootstrap seed; `evalsuite eval` is offered only when the
    candidate's configured baseline and control are the runs compared here.
    """
    task = str(comparison.candidate.get("task") or comparison.baseline.get("task") or "TASK")
    lines = []
    redo = _eval_line(comparison, arms, task)
    if redo:
        lines.append(redo)
    cand, base = _folder(arms, "candidate"), _folder(arms, "baseline")
    if cand and base:
        words = ["evalsuite", "report", cand, "--baseline", base]
        for role in ("control", "repeat"):
            folder = _folder(arms, role)
            if folder:
                words += [f"--{role}", folder]
        for field_ in getattr(comparison, "waived", None) or []:
            words += ["--allow", str(field_)]
        seed = (getattr(comparison, "settings", None) or {}).get("seed")
        if isinstance(seed, int) and seed != 0:
            words += ["--seed", str(seed)]
        lines.append(" ".join(shlex.quote(w) for w in words))
    return lines
