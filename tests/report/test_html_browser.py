"""The HTML report in a real headless Chromium: offline from file://, silent console, plots drawn, viewer works."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import INSTALL, Browser, Page, chromium_path
from stored_runs import Plan, synthetic_runs

from evalsuite.compare import compare_runs
from evalsuite.report import write_reports

pytestmark = pytest.mark.skipif(chromium_path() is None, reason=f"chromium not installed (`{INSTALL}`)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    plan = Plan(
        n=60, tokens=80, numerical={2, 5, 11, 20}, confident={7, 30}, flips={7}, control_diverges={2}, truncated={9}
    )
    runs = synthetic_runs(root, plan, control=True)
    cmp = compare_runs(runs["candidate"], runs["baseline"], controls={"control": runs["control"]}, n_resamples=300)
    return write_reports([cmp], root / "report", runs={"math500": runs}).html


def _open(browser: Browser, html: Path) -> Page:
    page = browser.page()
    page.goto(html.resolve().as_uri())
    return page


def test_harness_catches_errors_and_network_attempts(browser: Browser, tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text('<img src="https://cdn.example.com/x.png"><script>console.error("loud"); undefinedCall();</script>')
    page = _open(browser, bad)
    problems = page.problems()
    assert any("loud" in p for p in problems) and any("undefinedCall" in p for p in problems)
    assert page.blocked() == ["https://cdn.example.com/x.png"]


def test_report_works_offline_with_plots_and_viewer(
    browser: Browser, report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = _open(browser, report)
    plots = page.eval("""Array.from(document.querySelectorAll('svg.plot')).map(s => ({
        kind: s.dataset.plot, width: s.getBoundingClientRect().width,
        marks: s.querySelectorAll('rect, circle, line').length}))""")
    assert {p["kind"] for p in plots} == {"forest", "accuracy", "positions", "gaps", "speed"}
    assert all(p["width"] > 200 and p["marks"] > 5 for p in plots), plots
    top = page.screenshot(tmp_path / "report-top.png")

    rows = page.eval("document.querySelectorAll('#sample-list tbody tr').length")
    assert rows == 6
    page.eval("document.getElementById('f-confident').click()")
    assert page.eval("Array.from(document.querySelectorAll('#sample-list tbody tr')).map(r => r.dataset.key)") == [
        "math500/math500-0007",
        "math500/math500-0030",
    ]
    page.eval("document.getElementById('f-flipped').click()")
    assert page.eval("document.getElementById('f-count').textContent") == "1 of 6 shown"

    page.eval("document.querySelector('#sample-list tr[data-key=\"math500/math500-0007\"]').click()")
    view = page.eval("""(() => { const v = document.getElementById('sample-view');
        v.scrollIntoView();
        return {hidden: v.hidden, title: v.querySelector('h3').textContent,
          first: Array.from(v.querySelectorAll('.tok.first')).map(t => t.textContent),
          alts: Array.from(v.querySelectorAll('.arm.baseline table.alts tbody tr')).map(r => r.cells[1].textContent),
          grades: Array.from(v.querySelectorAll('.grade')).map(g => g.textContent),
          hash: location.hash}; })()""")
    assert not view["hidden"] and view["title"] == "math500/math500-0007"
    base_tok, cand_tok = view["first"]
    assert base_tok != cand_tok
    assert json.loads(view["alts"][1]) == cand_tok  # the candidate took the baseline's second choice
    assert view["grades"] == ["incorrect", "correct"] and view["hash"] == "#sample=math500%2Fmath500-0007"
    shot = page.screenshot(tmp_path / "report-viewer.png")

    assert page.problems() == [] and page.blocked() == []
    assert shot.stat().st_size > 10_000 and top.stat().st_size > 10_000
    with capsys.disabled():
        print(f"\nreport screenshots: {top} {shot}")


def test_deep_link_opens_a_sample(browser: Browser, report: Path) -> None:
    page = browser.page()
    page.goto(report.resolve().as_uri() + "#sample=math500%2Fmath500-0005")
    assert page.eval("document.querySelector('#sample-view h3').textContent") == "math500/math500-0005"
    assert page.problems() == []
