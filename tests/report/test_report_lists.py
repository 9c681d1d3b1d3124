"""Report lists keep one item per line: a block tag that ends a content line must not eat its newline."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest
from stored_runs import Plan, synthetic_runs

from evalsuite.compare import Comparison, compare_runs
from evalsuite.compare.outputs import Truncation
from evalsuite.report import ReportPaths, write_reports


@pytest.fixture(scope="module")
def truncated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, ReportPaths]:
    """Three runs with outputs cut at max_tokens; the baseline's are also cut inside the reasoning."""
    root = tmp_path_factory.mktemp("truncated")
    runs = synthetic_runs(root / "runs", Plan(n=8, tokens=40, truncated={1, 2}), control=True)
    cmp = compare_runs(runs["candidate"], runs["baseline"], controls={"control": runs["control"]}, n_resamples=100)
    cmp.truncation["baseline"] = Truncation("base", 8, 2, 1)  # both branches of the line: with and without the note
    return cmp, write_reports([cmp], root / "report", runs={"math500": runs})


def _section(md: str, title: str) -> list[str]:
    """The non-empty lines of one `### title` section."""
    body = md.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def test_each_truncation_line_is_its_own_markdown_list_item(truncated: tuple[Comparison, ReportPaths]) -> None:
    lines = _section(truncated[1].markdown.read_text(), "Truncation")
    assert lines == [
        "- baseline `base`: 2/8 outputs stopped at max_tokens (25.0 %). "
        "1 of them stopped inside the reasoning, before any answer.",
        "- control `ctl`: 2/8 outputs stopped at max_tokens (25.0 %).",
        "- candidate `spec`: 2/8 outputs stopped at max_tokens (25.0 %).",
    ]


def test_each_truncation_line_is_its_own_html_list_item(truncated: tuple[Comparison, ReportPaths]) -> None:
    html = truncated[1].html.read_text()
    section = html.split("<h3>Truncation</h3>", 1)[1].split("<h3>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", section, re.S)
    assert [re.sub(r"<[^>]+>", "", item).split(":")[0] for item in items] == [
        "baseline base",
        "control ctl",
        "candidate spec",
    ]
    assert "1 of them inside the reasoning" in items[0] and "reasoning" not in items[1] + items[2]


def test_markdown_templates_keep_the_newline_after_a_block_tag_that_ends_a_line() -> None:
    """With trim_blocks a tag such as `{% endif %}` after text on its line eats the newline and joins two lines;
    such a tag must say `+%}` so the line ends where the template's does."""
    templates = resources.files("evalsuite.report").joinpath("templates")
    offenders = []
    for template in sorted(Path(str(templates)).glob("*.md.j2")):
        for number, line in enumerate(template.read_text(encoding="utf-8").splitlines(), 1):
            text = line.strip()
            content = re.sub(r"\{%.*?%\}", "", text).strip()  # what the line prints besides its block tags
            if text.endswith("%}") and not text.endswith("+%}") and content:
                offenders.append(f"{template.name}:{number}: {text}")
    assert offenders == []
