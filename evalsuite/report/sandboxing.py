"""What the report says about the sandbox that graded model-written code: its level per run, and who was starved.

Every code grade records the isolation level its programs ran at, and a
grade left ungraded because the machine starved the program of CPU on
every try says so (`details["starved"]`).  A run graded without isolation
(`--sandbox none`, asked for explicitly) and starved programs are named in
the report's header; the level of each run is a row of the provenance table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsuite.compare.roles import SHOWN_ORDER
from evalsuite.records import Grade

NAMED = 8
"""Sample ids named per run in the header; the rest are counted."""


def levels(grades: Mapping[str, Grade]) -> list[str]:
    """The isolation levels a run's code grades ran at, in a stable order; empty when none was a code grade."""
    found = {str(g.details["sandbox"].get("isolation")) for g in grades.values() if _sandbox(g)}
    return sorted(found)


def _sandbox(grade: Grade) -> bool:
    return isinstance(grade.details.get("sandbox"), Mapping)


def level_cell(grades: Mapping[str, Grade]) -> str:
    """The provenance table's sandbox cell: the level(s), `none` marked as asked for."""
    return ", ".join("none (asked for: no isolation)" if level == "none" else level for level in levels(grades))


def notes(arms: Mapping[str, Any]) -> list[str]:
    """Header sentences: runs graded without isolation, and programs ungraded because the machine starved them."""
    out = []
    unisolated = [role for role in SHOWN_ORDER if role in arms and "none" in levels(arms[role].grades)]
    if unisolated:
        out.append(
            f'Code of {", ".join(unisolated)} was graded without a sandbox (`--sandbox none` or `sandbox = "none"`, '
            "asked for explicitly): its programs ran as the evaluating user, with that user's files and network."
        )
    starved = {
        role: sorted(sid for sid, g in arms[role].grades.items() if g.status == "ungraded" and g.details.get("starved"))
        for role in SHOWN_ORDER
        if role in arms
    }
    starved = {role: ids for role, ids in starved.items() if ids}
    if starved:
        total = sum(len(ids) for ids in starved.values())
        named = "; ".join(f"{role}: {_ids(ids)}" for role, ids in starved.items())
        out.append(
            f"{total} program(s) ungraded because the machine starved them of CPU on every try ({named}); they are "
            "left out of accuracy, not counted wrong. Grade again on a quieter machine (`evalsuite grade`)."
        )
    return out


def _ids(ids: list[str]) -> str:
    shown = ", ".join(f"`{sid}`" for sid in ids[:NAMED])
    return shown + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")
