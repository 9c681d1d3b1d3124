"""Reports people read: Markdown for GitHub and one self-contained offline HTML file with plots and a diff viewer."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsuite.compare import Comparison
from evalsuite.errors import writing
from evalsuite.report.folder import report_folder
from evalsuite.report.model import TaskReport, task_of, task_report
from evalsuite.report.render import render_html, render_markdown
from evalsuite.textfile import write_text

MARKDOWN_NAME = "report.md"
HTML_NAME = "report.html"
JSON_NAME = "comparison.json"


@dataclass(frozen=True)
class ReportPaths:
    """The files one `write_reports` call wrote."""

    folder: Path
    markdown: Path
    html: Path
    json: list[Path]


def build_task_reports(
    comparisons: Sequence[Comparison], runs: Mapping[str, Mapping[str, Any]] | None = None
) -> list[TaskReport]:
    """The report model for each comparison, with its run stores (task -> role -> store) when given."""
    return [task_report(c, (runs or {}).get(task_of(c))) for c in comparisons]


def write_reports(
    comparisons: Sequence[Comparison],
    out_dir: Path,
    *,
    runs: Mapping[str, Mapping[str, Any]] | None = None,
) -> ReportPaths:
    """Write report.md, report.html and one comparison JSON per task into `out_dir` (created if needed).

    `runs` maps task -> role ("baseline", "candidate", "control") -> run store;
    with it the report adds speed, truncation, full provenance and the texts
    the side-by-side viewer shows.
    """
    if not comparisons:
        raise ValueError("write_reports needs at least one comparison.")
    out = Path(out_dir)
    created = time.time()
    tasks = build_task_reports(comparisons, runs)
    md, html = out / MARKDOWN_NAME, out / HTML_NAME
    jsons = [out / (JSON_NAME if len(tasks) == 1 else f"comparison-{t.task}.json") for t in tasks]
    with writing(out, "write the report into"):  # a full disk or a folder that may not be written: exit 4
        out.mkdir(parents=True, exist_ok=True)
        write_text(md, render_markdown(tasks, created))
        write_text(html, render_html(tasks, created))
        for t, path in zip(tasks, jsons):
            t.comparison.to_json(path)
    return ReportPaths(out, md, html, jsons)


__all__ = ["ReportPaths", "build_task_reports", "report_folder", "write_reports"]
