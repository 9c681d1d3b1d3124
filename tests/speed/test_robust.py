"""Outliers, percentiles, ratio intervals, and the warnings an accuracy run's speed section must raise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalsuite.compare.speed import comparison_speed
from evalsuite.records import Completion, SampleResult
from evalsuite.report.model import speed_section
from evalsuite.speed import paired_speedup, request_speed
from evalsuite.speed.robust import mad_outliers, percentiles, ratio_estimate
from evalsuite.speed.summary import summarize
from evalsuite.store import MemoryRun, RunManifest


def test_mad_rule_flags_a_stall_and_keeps_ordinary_jitter() -> None:
    rng = np.random.default_rng(1)
    speeds = list(1200 * np.exp(rng.normal(0, 0.03, 30))) + [32.8]
    mask = mad_outliers(speeds)
    assert mask.tolist() == [False] * 30 + [True]
    # a request 15 % faster than a very steady crowd is workload, not an outlier (the MAD floor)
    steady = [890.0 + i for i in range(20)] + [1040.0]
    assert not mad_outliers(steady).any()
    # but one 2x faster (an early stop, a cache hit) is
    assert mad_outliers(steady[:-1] + [1800.0]).tolist()[-1]


def test_mad_rule_edge_cases() -> None:
    assert not mad_outliers([1.0, 100.0, 1.0]).any()  # too few values to call any out
    assert not mad_outliers([5.0] * 10).any()  # no spread at all
    same = mad_outliers([5.0] * 9 + [50.0])  # MAD is zero: the mean absolute deviation stands in
    assert same.tolist() == [False] * 9 + [True]
    with_gaps = mad_outliers([math.nan, 10, 10.5, 9.8, 10.1, 0.0, 300.0])
    assert with_gaps.tolist() == [False, False, False, False, False, False, True]  # NaN and 0 are untimed, not outliers
    linear = mad_outliers([1.0, 1.1, 0.9, 1.0, 1.05, -20.0], log=False)
    assert linear.tolist()[-1] and not linear[:-1].any()


def test_percentiles_skip_missing_values() -> None:
    p = percentiles([1, 2, 3, 4, math.nan] + list(range(5, 101)))
    assert p["p50"] == pytest.approx(50.5) and p["p90"] == pytest.approx(90.1) and p["p99"] == pytest.approx(99.01)
    assert all(math.isnan(v) for v in percentiles([math.nan]).values())


def test_ratio_estimate_is_a_geometric_mean_with_a_seeded_interval() -> None:
    assert ratio_estimate([2.0, 0.5]).geometric_mean == pytest.approx(1.0)
    rng = np.random.default_rng(3)
    ratios = list(1.6 * np.exp(rng.normal(0, 0.1, 40)))
    a, b = ratio_estimate(ratios, seed=7), ratio_estimate(ratios, seed=7)
    assert a == b  # reproducible
    assert a.low95 < a.geometric_mean < a.high95 and 1.5 < a.low95 and a.high95 < 1.75
    assert a.faster_share == 1.0
    one = ratio_estimate([1.3])
    assert one.n == 1 and one.geometric_mean == pytest.approx(1.3) and math.isnan(one.low95)
    flat = ratio_estimate([1.2] * 5)
    assert flat.low95 == pytest.approx(1.2) and flat.high95 == pytest.approx(1.2)
    assert ratio_estimate([]).n == 0


def _loop_interval(logs: np.ndarray, seed: int, n_resamples: int, bca: bool) -> tuple[float, float]:
    """The hand-written loop speedup.py used before scipy: seeded index draws, percentile, then BCa's correction."""
    from scipy.special import ndtr, ndtri

    n, alpha = len(logs), 0.025
    boot = logs[np.random.default_rng(seed).integers(0, n, (n_resamples, n))].mean(axis=1)
    q = [alpha, 1 - alpha]
    if bca:
        theta = logs.mean()
        z0 = ndtri(((boot < theta).sum() + (boot <= theta).sum()) / (2 * n_resamples))
        u = (logs.sum() - logs) / (n - 1)
        u = u.mean() - u
        a = (u**3).sum() / (6 * ((u**2).sum()) ** 1.5)
        q = [float(ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))) for z in (ndtri(alpha), -ndtri(alpha))]
    low, high = np.quantile(boot, q)
    return math.exp(low), math.exp(high)


def test_speedup_interval_is_the_old_loop_s_interval_with_bca() -> None:
    """scipy.stats.bootstrap draws the old loop's indices from the same seed: the figures are the same numbers."""
    from evalsuite.speed.robust import N_RESAMPLES

    rng = np.random.default_rng(3)
    ratios = 1.6 * np.exp(rng.normal(0, 0.1, 40))
    est = ratio_estimate(list(ratios), seed=7)
    low, high = _loop_interval(np.log(ratios), 7, N_RESAMPLES, bca=True)
    assert (est.low95, est.high95) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    old = _loop_interval(np.log(ratios), 7, N_RESAMPLES, bca=False)  # what reports printed before (percentile)
    assert abs(est.low95 - old[0]) < 0.01 and abs(est.high95 - old[1]) < 0.01  # BCa moves it by under 1 %


def _completion(tokens: int, decode_s: float) -> Completion:
    timings = {"predicted_n": float(tokens), "predicted_ms": decode_s * 1000.0, "prompt_ms": 20.0}
    return Completion(
        "x", "length", usage={"completion_tokens": tokens}, timings=timings, latency_s=0.02 + decode_s, ttft_s=0.02
    )


def _stalled_eval(n: int = 20) -> tuple[dict[str, Completion], dict[str, Completion]]:
    """The issue's run: baseline ~1230 tokens/s with one stalled sample, candidate ~540 tokens/s (0.44x)."""
    rng = np.random.default_rng(0)
    base = {f"s{i}": _completion(257, 256 / (1230 * math.exp(rng.normal(0, 0.02)))) for i in range(n)}
    base["s7"] = _completion(257, 256 / 1230 + 160.0)  # stalled behind another process
    cand = {f"s{i}": _completion(257, 256 / (540 * math.exp(rng.normal(0, 0.02)))) for i in range(n)}
    return base, cand


def test_a_stalled_sample_is_an_outlier_and_the_disagreement_is_a_warning() -> None:
    base_c, cand_c = _stalled_eval()
    base = summarize("baseline", {k: request_speed(k, c) for k, c in base_c.items()}, [])
    cand = summarize("dflash", {k: request_speed(k, c) for k, c in cand_c.items()}, [])
    assert base.outliers == ("s7",)
    assert base.median_tokens_per_s == pytest.approx(1230, rel=0.03)
    assert base.aggregate_tokens_per_s == pytest.approx(1230, rel=0.03)  # the stall is not averaged in
    assert base.aggregate_all_tokens_per_s < 40  # ...but is still visible
    assert any("1 of 20 timed requests are outliers" in w and "s7" in w for w in base.warnings)
    assert any("too spread to trust an aggregate" in w for w in base.warnings)
    assert not cand.warnings
    sp = paired_speedup(cand, base)
    assert sp.excluded == ("s7",) and sp.n == 19
    assert sp.geometric_mean == pytest.approx(0.44, abs=0.02) and sp.high95 < 1
    assert sp.aggregate == pytest.approx(0.44, abs=0.02)
    assert sp.aggregate_all > 5 and sp.wall_clock_all > 5  # what the old report printed, silently
    assert sum("is not a speedup to trust" in w for w in sp.warnings) == 2


def _speed(arms: dict[str, tuple[str, dict[str, Completion]]]):  # type: ignore[no-untyped-def]
    runs = {
        role: MemoryRun(RunManifest(fingerprint=f"fp-{t}", target=t, task="gsm8k"), {}) for role, (t, _) in arms.items()
    }
    results = {
        role: {k: SampleResult(k, "gsm8k", {}, c) for k, c in completions.items()}
        for role, (_, completions) in arms.items()
    }
    return comparison_speed(runs, results)


def test_report_speed_section_states_the_definition_and_every_warning() -> None:
    base_c, cand_c = _stalled_eval()
    rng = np.random.default_rng(5)
    repeat = {k: _completion(257, 256 / (1230 * 1.3 * math.exp(rng.normal(0, 0.02)))) for k in base_c}
    speed = _speed({"baseline": ("baseline", base_c), "repeat": ("baseline", repeat), "candidate": ("dflash", cand_c)})
    section = speed_section(speed)
    assert section is not None and section["speedup"] is not None
    assert "(output tokens - 1)" in section["definition"]
    warnings = " ".join(section["warnings"])
    assert "outliers by the MAD rule" in warnings and "too spread to trust" in warnings
    assert "The two runs of the baseline differ in decode speed by 1.3" in warnings
    assert {r["role"]: r["outliers"] for r in section["rows"]} == {"baseline": 1, "repeat": 0, "candidate": 0}
    assert speed.repeat_speedup is not None and speed.repeat_speedup.geometric_mean == pytest.approx(1.3, rel=0.02)
    quiet = speed_section(_speed({"baseline": ("b", cand_c), "candidate": ("c", cand_c)}))
    assert quiet is not None and quiet["warnings"] == []


def test_the_written_report_carries_the_warnings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from stored_runs import Plan, synthetic_runs, write_run

    from evalsuite.compare import compare_runs
    from evalsuite.report import write_reports

    runs = synthetic_runs(tmp_path / "runs", Plan(n=20, tokens=60, speedup=0.5))
    base = runs["baseline"]
    results = base.results()
    stalled = results["math500-0003"]
    timings = {**stalled.completion.timings, "predicted_ms": stalled.completion.timings["predicted_ms"] * 400}
    results["math500-0003"] = replace(
        stalled, completion=replace(stalled.completion, timings=timings, latency_s=stalled.completion.latency_s * 400)
    )
    grades = list(base.grades().values())
    slow = write_run(tmp_path / "slow", base.manifest, list(results.values()), grades, list(base.samples().values()))
    cmp = compare_runs(runs["candidate"], slow, n_resamples=200)
    paths = write_reports(
        [cmp], tmp_path / "report", runs={"math500": {"baseline": slow, "candidate": runs["candidate"]}}
    )
    md, html = paths.markdown.read_text(), paths.html.read_text()
    for text in (md, html):
        assert "(output tokens - 1)" in text
        assert "math500-0003" in text and "too spread to trust an aggregate" in text
        assert "not a speedup to trust" in text
    assert md.count("> **Warning:**") == 5 and html.count('class="warn speed-warning"') == 5


def test_the_speedup_interval_is_resampled_in_bounded_batches_and_is_the_unbatched_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long run's paired ratios: resamples and BCa's jackknife made a batch at a time (unbatched, 20,000 ratios
    held 3 GB at once), with the interval scipy gives from one whole batch."""
    import scipy.stats

    from evalsuite.speed import robust
    from evalsuite.stats.intervals import RESAMPLED_VALUES

    ratios = list(np.random.default_rng(3).lognormal(0.7, 0.3, 3000))
    whole = scipy.stats.bootstrap(
        (np.log(ratios),), np.mean, n_resamples=robust.N_RESAMPLES, method="BCa", random_state=np.random.default_rng(5)
    )
    batches: list[int | None] = []
    real = scipy.stats.bootstrap

    def counted(*args: object, **kwargs: object) -> object:
        batches.append(kwargs.get("batch"))  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(robust.sps, "bootstrap", counted)
    got = ratio_estimate(ratios, seed=5)
    assert (got.low95, got.high95) == (
        math.exp(whole.confidence_interval.low),
        math.exp(whole.confidence_interval.high),
    )
    assert batches and all(b is not None and b * len(ratios) <= RESAMPLED_VALUES for b in batches)
