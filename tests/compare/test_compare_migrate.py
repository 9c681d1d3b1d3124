"""Stored comparison.json files of every older version read as today's schema, their verdicts untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalsuite.compare import SCHEMA_VERSION
from evalsuite.compare.migrate import MIGRATIONS, migrate, read_comparison
from evalsuite.errors import StoreError

HERE = Path(__file__).parent
V3 = HERE / "fixtures" / "comparison_v3.json"  # spec_f16_draftq4 against base_f16, with both controls
V1 = HERE.parent / "core" / "fixtures" / "runs_v1" / "comparison.json"

TODAY_DIVERGENCE = {"gap", "gap_bound", "gap_source", "grid_step", "margin", "margin_source", "candidate_rank"}
TODAY_CONTROL = {"max_gap", "median_gap", "elsewhere", "flips", "max_gap_all"}


def test_every_older_version_has_a_step() -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def test_a_version_3_comparison_reads_with_the_gaps_its_logprobs_tell_and_its_verdicts_as_judged() -> None:
    before = json.loads(V3.read_text())
    after = read_comparison(V3)
    assert after["schema_version"] == SCHEMA_VERSION and before["schema_version"] == 3
    assert after["token"]["label"] == before["token"]["label"] == "NUMERICAL-ONLY"
    assert before["summary"].startswith("LOSSLESS within numerics: 12/24 token-identical")
    assert after["summary"] == "NUMERICAL-ONLY: " + before["summary"].removeprefix("LOSSLESS within numerics: ")
    for old, new in zip(before["divergences"], after["divergences"]):
        assert TODAY_DIVERGENCE <= new.keys() and "margin_step" not in new
        assert new["gap"] == pytest.approx(old["baseline_logprob"] - old["candidate_logprob"])
        assert (new["gap_source"], new["gap_bound"], new["kind"]) == ("baseline", False, old["kind"])
        assert new["grid_step"] == old["margin_step"]
    assert after["token"]["max_gap"] == max(d["gap"] for d in after["divergences"])
    assert "max_margin" not in after["token"] and after["token"]["thresholds"]["thin"] is False
    assert "cap" not in after["token"]["thresholds"]["resolution"]
    for control in after["controls"]:
        assert TODAY_CONTROL <= control.keys() and control["max_gap"] is None  # an old file kept margins only
    assert json.loads(V3.read_text()) == before  # read, never rewritten


def test_a_version_1_comparison_reads_with_its_roles_renamed() -> None:
    old: dict[str, Any] = json.loads(V1.read_text())
    old["controls"] = [{"name": "numerics:self", "kind": "numerics", "max_margin": 0.02}]
    old["divergences"] = [{"explained_by": "control:determinism:base", "margin": 0.01, "baseline_logprob": None}]
    doc = migrate(old)
    assert doc["controls"][0]["kind"] == "control" and doc["controls"][0]["name"] == "control:self"
    assert doc["divergences"][0]["explained_by"] == "control:repeat:base" and doc["divergences"][0]["gap"] is None
    assert {"holm_family", "speed", "truncation"} <= doc.keys() and doc["token"]["thresholds"]["resolution"] is None
    assert old["schema_version"] == 1 and "gap" not in old["divergences"][0]  # the caller's copy is untouched


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("LOSSLESS: 4/4 token-identical; accuracy not graded", "IDENTICAL: 4/4 token-identical; accuracy not graded"),
        (
            "LOSSLESS within numerics: 1/2 token-identical, 1 divergence",
            "NUMERICAL-ONLY: 1/2 token-identical, 1 divergence",
        ),
        ("LOSSY: 1/2 token-identical, diverging more often", "LOSSY: 1/2 token-identical, diverging more often"),
        ("UNDETERMINED: 0/1 token-identical", "UNDETERMINED: 0/1 token-identical"),
    ],
)
def test_a_version_4_headline_opens_with_the_token_label_and_keeps_the_rest(old: str, new: str) -> None:
    doc = migrate({"schema_version": 4, "summary": old})
    assert doc["summary"] == new and doc["schema_version"] == SCHEMA_VERSION


def test_a_version_1_headline_reads_in_todays_words() -> None:
    doc = read_comparison(V1)
    assert doc["summary"].startswith("IDENTICAL: 4/4 token-identical") and doc["token"]["label"] == "IDENTICAL"


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION + 1, "3"])
def test_an_unknown_version_is_refused_naming_it(version: object) -> None:
    with pytest.raises(StoreError, match=f"comparison schema version {version!r}"):
        migrate({"schema_version": version}, "c.json")


def test_a_file_that_is_no_comparison_is_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("[1, 2]")
    with pytest.raises(StoreError, match="holds no JSON object"):
        read_comparison(tmp_path / "c.json")
    with pytest.raises(StoreError, match="Cannot read the comparison"):
        read_comparison(tmp_path / "missing.json")
