"""Markdown and HTML reports from real stored runs: content, escaping, offline-ness, folders, several tasks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import markupsafe
import numpy as np
import pytest
from stored_runs import Plan, manifest, synthetic_runs, write_run

from evalsuite.compare import compare_runs
from evalsuite.records import Completion, Grade, Sample, SampleResult
from evalsuite.report import report_folder, write_reports
from evalsuite.report.model import rule_counts
from evalsuite.report.plots import IntervalRow, forest, gaps

PLAN = Plan(
    n=60, tokens=80, numerical={2, 5, 11, 20}, confident={7, 30}, flips={7}, control_diverges={2}, truncated={9}
)


@pytest.fixture(scope="module")
def lossy(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("lossy")
    runs = synthetic_runs(root / "runs", PLAN, control=True)
    cmp = compare_runs(runs["candidate"], runs["baseline"], controls={"control": runs["control"]}, n_resamples=300)
    return cmp, runs, write_reports([cmp], root / "report", runs={"math500": runs})


def test_markdown_carries_verdict_tables_speed_and_provenance(lossy) -> None:
    cmp, runs, paths = lossy
    md = paths.markdown.read_text()
    assert md.count("> [!CAUTION]") == 1 and f"**math500: {cmp.summary}**" in md
    assert f"> - Tokens: **LOSSY**. {cmp.token.reason}" in md
    overall = re.search(
        r"^\| \*\*overall\*\* \| 60 \| 70\.0 % \| \[57\.5, 80\.1\] \| 71\.7 % \|.*\| INCONCLUSIVE \|$", md, re.M
    )
    assert overall, md
    assert "| subject = Geometry | 20 |" in md and "| level = 3 | 20 |" in md
    assert "**54/60** outputs token-identical (90.0 %)" in md
    assert "| 6/60 | 4 | 2 | 0 | 1 | 24 / 35.0 / 59 | 1 | 1 (1 gained, 0 lost) |" in md
    assert "| candidate | spec | 60/60 | 90.0 | 90.0 | 20 ms |" in md and "| 75.0 % | 3,600/4,800 | 4.00 |" in md
    assert "**1.80×** geometric mean" in md
    assert "- baseline `base`: 1/60 outputs stopped at max_tokens (1.7 %)." in md
    assert (
        "| server flags | `-m target.gguf` | `-m target.gguf -md draft.gguf` | `-m target.gguf -md draft.gguf` |" in md
    )
    assert (
        f"evalsuite report {runs['candidate'].folder.resolve()} --baseline {runs['baseline'].folder.resolve()} "
        f"--control {runs['control'].folder.resolve()}"
    ) in md
    doc = json.loads(paths.json[0].read_text())
    assert doc == json.loads(cmp.to_json())
    assert doc["truncation"]["baseline"] == {"target": "base", "n": 60, "truncated": 1, "in_reasoning": 0}


def test_the_report_counts_correct_grades_per_deciding_rule(lossy) -> None:
    """Rows 0, 20 and 40 of the baseline were accepted by a lenient rule; the candidate's by none."""
    _, _, paths = lossy
    md = paths.markdown.read_text(encoding="utf-8")
    assert "### Grading rules" in md
    assert re.search(r"\| baseline \| `base` \| 42 \| 3 \| strict 39, approximation 3 \|", md), md
    assert re.search(r"\| candidate \| `spec` \| \d+ \| 0 \| strict \d+ \|", md)
    assert "approximation 3" in paths.html.read_text(encoding="utf-8")


def test_rule_counts_put_strict_first_and_skip_wrong_grades() -> None:
    grades = {
        "a": Grade("a", "correct", "1", "equal"),
        "b": Grade("b", "correct", "x", "renamed", 1.0, {"rule": "renamed"}),
        "c": Grade("c", "incorrect", "2", "differ", 0.0, {"rule": "renamed"}),
        "d": Grade("d", "ungraded", None, "timeout"),
    }
    assert rule_counts(grades) == {"strict": 1, "renamed": 1}


def test_html_is_self_contained(lossy) -> None:
    html = lossy[2].html.read_text()
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert html.count("<script") == 2 and html.count("<svg") == 5
    data = json.loads(re.search(r'<script type="application/json" id="evalsuite-data">(.*?)</script>', html, re.S)[1])
    assert [s["id"] for s in data["samples"]] == [f"math500-{i:04d}" for i in (2, 5, 7, 11, 20, 30)]
    seven = data["samples"][2]
    assert (
        seven["kind"] == "confident"
        and seven["flipped"] is True
        and seven["grades"]["candidate"]["status"] == "correct"
    )
    assert (
        seven["baseline"]["tokens"][seven["pos"] - seven["start"]][0]
        != seven["candidate"]["tokens"][seven["pos"] - seven["start"]][0]
    )
    assert [a[1] for a in seven["baseline"]["alternatives"]] == sorted(
        (a[1] for a in seven["baseline"]["alternatives"]), reverse=True
    )


def test_the_viewer_names_each_arms_alternatives_at_the_divergence_as_stored(lossy) -> None:
    """Only that token's alternatives are read by name (not every token's): the same strings a whole read gives,
    the candidate's included, where it has alternatives there."""
    _, runs, paths = lossy
    html = paths.html.read_text()
    data = json.loads(re.search(r'<script type="application/json" id="evalsuite-data">(.*?)</script>', html, re.S)[1])
    named = 0
    for sample in data["samples"]:
        for arm in ("baseline", "candidate"):
            result = runs[arm].result(sample["id"], strings="all")
            trace, pos = result.completion.tokens, sample["pos"]
            stored = {
                name: round(float(lp), 4)
                for name, lp in zip(trace.top_pieces[pos], trace.top_logprobs[pos])
                if np.isfinite(lp)
            }
            assert dict(map(tuple, sample[arm]["alternatives"])) == stored
            named += len(stored)
    assert named > 20


def _hostile_runs(root: Path) -> dict:
    """Two one-sample runs whose outputs try to break out of the HTML script element and the Markdown table."""
    evil = "</script><script>alert(1)</script> | <b>x</b>"
    out = {}
    for role, text in (("baseline", "answer 1"), ("candidate", evil)):
        comp = Completion(text=text, finish_reason="stop", latency_s=1.0)
        out[role] = write_run(
            root / role,
            manifest(role, role),
            [SampleResult("s|1", "math500", {"subject": "A|B"}, comp)],
            [Grade("s|1", "correct", text, "r")],
            [Sample("s|1", "math500", ({"role": "user", "content": evil},), "1")],
        )
    return out


def test_model_output_cannot_break_out_of_html_or_markdown(tmp_path: Path) -> None:
    runs = _hostile_runs(tmp_path)
    cmp = compare_runs(runs["candidate"], runs["baseline"], n_resamples=100)
    paths = write_reports([cmp], tmp_path / "r", runs={"math500": runs})
    html = paths.html.read_text()
    assert "alert(1)" in html and "<script>alert(1)" not in html and html.count("<script") == 2
    md = paths.markdown.read_text()

    def cells(line: str) -> list[str]:
        return re.split(r"(?<!\\)\|", line)[1:-1]  # split on unescaped pipes only

    divergence = next(line for line in md.splitlines() if line.startswith("| s\\|1 |"))
    stratum = next(line for line in md.splitlines() if line.startswith("| subject = A\\|B |"))
    assert len(cells(divergence)) == 7 and len(cells(stratum)) == 13


def test_identical_runs_without_stores_still_report(tmp_path: Path) -> None:
    runs = synthetic_runs(tmp_path, Plan(n=9))
    cmp = compare_runs(runs["candidate"], runs["baseline"], n_resamples=100)
    paths = write_reports([cmp], tmp_path / "r")
    md = paths.markdown.read_text()
    assert "> [!WARNING]" in md  # identical tokens, but 9 items cannot show accuracy equivalence
    assert "None: every output is token-identical to the baseline." in md
    assert "**1.80×** geometric mean" in md  # speed comes with the comparison, not from the stores
    assert "| target | `base` | `spec` |" in md
    assert paths.html.read_text().count("<svg") == 3  # forest, accuracy and speed; nothing diverged


def test_several_tasks_in_one_report(tmp_path: Path) -> None:
    a = synthetic_runs(tmp_path / "a", Plan(n=30, task="math500", numerical={3}))
    b = synthetic_runs(tmp_path / "b", Plan(n=30, task="gsm8k", confident={4}))
    cmps = [compare_runs(r["candidate"], r["baseline"], n_resamples=100) for r in (a, b)]
    paths = write_reports(cmps, tmp_path / "r", runs={"math500": a, "gsm8k": b})
    md = paths.markdown.read_text()
    assert "## math500: `spec` vs `base`" in md and "## gsm8k: `spec` vs `base`" in md
    assert "> [!CAUTION]\n> **gsm8k: LOSSY" in md
    assert sorted(p.name for p in paths.json) == ["comparison-gsm8k.json", "comparison-math500.json"]
    data = re.search(r'id="evalsuite-data">(.*?)</script>', paths.html.read_text(), re.S)[1]
    assert [s["key"] for s in json.loads(data)["samples"]] == ["math500/math500-0003", "gsm8k/gsm8k-0004"]


def test_report_folder_is_per_target_and_never_reused(tmp_path: Path) -> None:
    first = report_folder(tmp_path, "my/dflash", now=0)
    second = report_folder(tmp_path, "my/dflash", now=0)
    assert first == tmp_path / "my_dflash" / "19700101-000000" and second.name == "19700101-000000-2"


def test_plots_draw_what_they_are_given() -> None:
    assert forest([], 0.02, "t") is None
    svg = str(forest([IntervalRow("overall", 0.01, -0.02, 0.04)], 0.02, "t"))
    assert svg.count("<circle") == 1 and svg.count('stroke-dasharray="4 3"') == 2
    hist = str(gaps({"numerical": [0.01, 0.03], "confident": [2.0, np.nan]}, 0.1, "m"))
    assert "threshold 0.1" in hist and hist.count("<rect") >= 2 + 2  # bars plus legend swatches


def test_viewer_data_writes_missing_numbers_as_null() -> None:
    from evalsuite.report.render import _json_for_script
    from evalsuite.report.samples import _lp

    text = str(_json_for_script({"lp": [_lp(-0.123456), float("nan"), np.float32("inf")], "t": "</script>"}))
    assert text == '{"lp":[-0.1235,null,null],"t":"\\u003c/script\\u003e"}'
    assert _lp(float("nan")) is None
    assert str(_json_for_script([np.float32(0.5), float("inf")])) == "[0.5,null]"


def test_the_reproduce_line_limits_to_the_runs_size_when_they_keep_no_prompts() -> None:
    """Runs without a samples table: --limit is how many samples the comparison counted, not the report's few."""
    from types import SimpleNamespace

    from evalsuite.compare.outputs import Truncation
    from evalsuite.report.provenance import reproduce
    from evalsuite.store import RunManifest

    def arm(target: str) -> SimpleNamespace:
        manifest = RunManifest(fingerprint=target, target=target, task="gsm8k", target_config={"baseline": "base"})
        return SimpleNamespace(manifest=manifest, samples={}, results={"only-a-divergent-one": None}, folder="")

    comparison = SimpleNamespace(
        candidate={"target": "spec", "task": "gsm8k"},
        baseline={"target": "base", "task": "gsm8k"},
        truncation={"candidate": Truncation("spec", 40, 0, 0), "baseline": Truncation("base", 40, 0, 0)},
    )
    (line,) = reproduce(comparison, {"candidate": arm("spec"), "baseline": arm("base")})
    assert line.startswith("evalsuite eval spec --task gsm8k --limit 40 ")


def test_a_slower_candidate_is_explained_in_both_reports(tmp_path: Path) -> None:
    runs = synthetic_runs(tmp_path / "runs", Plan(n=30, tokens=60, speedup=0.6))
    cmp = compare_runs(runs["candidate"], runs["baseline"], n_resamples=300)
    paths = write_reports([cmp], tmp_path / "report", runs={"math500": runs})
    note = cmp.speed.speedup.slower if cmp.speed and cmp.speed.speedup else None
    assert note is not None and "kept 4.00 tokens on average: 75% of about 4.0 drafted tokens" in note
    assert f"\n{note}\n" in paths.markdown.read_text()
    assert f'<p class="note slower-note">{markupsafe.escape(note)}</p>' in paths.html.read_text()
