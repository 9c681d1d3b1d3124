"""The sampling statistics against simulated distributions: calibration under the null, power at a known TV."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from sampling_sim import ToyModel, arm
from scipy import stats

from evalsuite.sampling import (
    END,
    Draw,
    JudgeSettings,
    build_tree,
    detectable_tv,
    draws_for_tv,
    judge,
    node_test,
    pool,
    total_variation,
)
from evalsuite.sampling.nodetest import OTHER
from evalsuite.stats.significance import holm_adjust as holm


def test_tree_counts_outcomes_at_every_prefix_and_end_only_when_the_draw_stopped() -> None:
    draws = [Draw("p", 1, (5, 7), True), Draw("p", 2, (5, 8), False), Draw("p", 3, (5,), True)]
    tree = build_tree(draws)
    assert tree.counts[("p", ())] == Counter({5: 3})
    assert tree.counts[("p", (5,))] == Counter({7: 1, 8: 1, END: 1})
    assert tree.counts[("p", (5, 7))] == Counter({END: 1})
    assert ("p", (5, 8)) not in tree.counts  # cut by max_tokens: it never chose
    assert tree.draws["p"] == 3


def test_tree_refuses_draws_without_token_ids() -> None:
    with pytest.raises(ValueError, match="without ids"):
        build_tree([Draw("p", 1, (3, -1), False)])


def test_pooling_merges_rare_outcomes_until_every_expected_count_is_five() -> None:
    a = Counter({1: 40, 2: 30, 3: 3, 4: 2, 5: 1})
    b = Counter({1: 38, 2: 33, 3: 4, 4: 1, 6: 2})
    names, table = pool(a, b)
    assert names == [1, 2, OTHER]
    assert table.tolist() == [[40, 30, 6], [38, 33, 7]]
    expected = stats.contingency.expected_freq(table)
    assert expected.min() >= 5
    assert table.sum() == sum(a.values()) + sum(b.values())


def test_pooling_folds_a_small_remainder_into_the_last_kept_column() -> None:
    names, table = pool(Counter({1: 50, 2: 9, 3: 1}), Counter({1: 50, 2: 9}))
    assert table.shape == (2, 2) and names[0] == 1 and stats.contingency.expected_freq(table).min() >= 5


def test_a_node_with_one_outcome_has_nothing_to_test() -> None:
    t = node_test(Counter({3: 30}), Counter({3: 25}))
    assert not t.testable and math.isnan(t.p)


def test_node_test_matches_scipy_on_the_pooled_table() -> None:
    a, b = Counter({1: 60, 2: 25, 3: 15}), Counter({1: 45, 2: 35, 3: 20})
    t = node_test(a, b)
    ref = stats.chi2_contingency([[60, 25, 15], [45, 35, 20]], correction=False)
    assert t.df == 2 and t.p == pytest.approx(ref.pvalue) and t.statistic == pytest.approx(ref.statistic)
    g = node_test(a, b, method="g")
    assert g.p == pytest.approx(
        stats.chi2_contingency([[60, 25, 15], [45, 35, 20]], correction=False, lambda_="log-likelihood").pvalue
    )


def test_holm_matches_statsmodels_and_skips_untestable_nodes() -> None:
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    ref = multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(list(ref))
    out = holm([0.01, float("nan"), 0.04])
    assert math.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)


def test_total_variation_of_frequencies() -> None:
    assert total_variation(Counter({1: 5, 2: 5}), Counter({1: 10})) == pytest.approx(0.5)
    assert total_variation(Counter({1: 3}), Counter({1: 7})) == 0


def test_node_p_values_are_calibrated_under_the_null() -> None:
    """Both arms from one distribution: P(p < alpha) is close to alpha at each nominal level."""
    rng = np.random.default_rng(1)
    probs = np.array([0.45, 0.25, 0.12, 0.08, 0.05, 0.03, 0.02])
    pvalues = []
    for _ in range(3000):
        n_a, n_b = rng.integers(30, 120, size=2)
        a = Counter(dict(enumerate(rng.multinomial(n_a, probs))))
        b = Counter(dict(enumerate(rng.multinomial(n_b, probs))))
        t = node_test(+a, +b)
        if t.testable:
            pvalues.append(t.p)
    p = np.array(pvalues)
    for alpha in (0.01, 0.05, 0.2):
        rate = (p < alpha).mean()
        se = math.sqrt(alpha * (1 - alpha) / len(p))
        assert abs(rate - alpha) < 4 * se + 0.01, (alpha, rate)


@pytest.mark.parametrize("df", [1, 3])
def test_power_at_the_detectable_tv_is_the_promised_80_percent(df: int) -> None:
    """The least favourable shift of size d (mass moved between two halves) is detected ~80 % of the time."""
    n, level = 150, 0.05 / 20
    d = detectable_tv(n, n, df=df, level=level)
    k = df + 1
    base = np.full(k, 1 / k)
    sign = np.where(np.arange(k) < k // 2, 1.0, -1.0)
    p, q = base + sign * base * d, base - sign * base * d  # TV(p, q) = d, |p - q| proportional to the mean
    assert 0.5 * np.abs(p - q).sum() == pytest.approx(d)
    rng = np.random.default_rng(2)
    hits = 0
    runs = 1500
    for _ in range(runs):
        a = Counter(dict(enumerate(rng.multinomial(n, p))))
        b = Counter(dict(enumerate(rng.multinomial(n, q))))
        hits += node_test(a, b).p < level
    assert 0.8 - 0.05 < hits / runs < 0.8 + 0.06


def test_any_other_shape_at_the_same_tv_is_detected_at_least_as_often() -> None:
    n, level = 150, 0.05
    d = detectable_tv(n, n, df=2, level=level)
    p = np.array([0.7, 0.2, 0.1])
    q = p + np.array([-d, 0, d])  # TV d, moved onto a rare token: larger noncentrality
    rng = np.random.default_rng(3)
    hits = sum(
        node_test(Counter(dict(enumerate(rng.multinomial(n, p)))), Counter(dict(enumerate(rng.multinomial(n, q))))).p
        < level
        for _ in range(800)
    )
    assert hits / 800 > 0.8


def test_detectable_tv_shrinks_like_one_over_root_n_and_inverts_draws_for_tv() -> None:
    d100, d400 = detectable_tv(100, 100), detectable_tv(400, 400)
    assert d400 == pytest.approx(d100 / 2, rel=1e-6)
    assert detectable_tv(draws_for_tv(0.1), draws_for_tv(0.1)) <= 0.1
    assert detectable_tv(draws_for_tv(0.1) - 2, draws_for_tv(0.1) - 2) > 0.1
    assert detectable_tv(100, 100, level=0.001) > d100  # a stricter level needs more draws
    assert math.isinf(detectable_tv(0, 10))


def test_family_wise_false_positives_stay_below_alpha_on_whole_trees() -> None:
    """Same model in both arms, many nodes per tree: DIFFERENT no more often than alpha (+ noise)."""
    rng = np.random.default_rng(4)
    models = [ToyModel(f"q{i}") for i in range(2)]
    settings = JudgeSettings(min_count=20, max_tv=1.0)
    replicates, different, family = 120, 0, []
    for _ in range(replicates):
        v = judge(build_tree(arm(models, 80, 5, rng)), build_tree(arm(models, 80, 5, rng)), settings)
        different += v.outcome == "DIFFERENT"
        family.append(v.family)
    assert min(family) >= 4  # the trees really have several tested nodes each
    assert different / replicates <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / replicates)


def test_a_tilted_node_is_found_with_the_over_represented_token() -> None:
    rng = np.random.default_rng(5)
    base = ToyModel("q0")
    first = int(np.argmax(np.diff([0.0, *base.probs(())])[:-1]))
    lossy = ToyModel("q0", tilt={(first,): (4, 0.4)})
    v = judge(build_tree(base.draws(300, 4, rng)), build_tree(lossy.draws(300, 4, rng)), JudgeSettings(min_count=20))
    assert v.outcome == "DIFFERENT", v.sentence
    strongest = min(v.differing, key=lambda n: n.p_adjusted)
    assert strongest.prefix == (first,) and strongest.over_represented == 4
    assert strongest.tv > 0.25
    assert "DIFFERENT (here)" in v.sentence


def test_same_verdict_states_its_detectable_tv_and_too_few_draws_says_so() -> None:
    rng = np.random.default_rng(6)
    m = [ToyModel("q0")]
    v = judge(build_tree(arm(m, 400, 3, rng)), build_tree(arm(m, 400, 3, rng)), JudgeSettings(max_tv=0.3))
    assert v.outcome == "SAME" and f"TV >= {v.detectable:.2f}" in v.sentence and v.detectable <= 0.3
    few = judge(build_tree(arm(m, 30, 3, rng)), build_tree(arm(m, 30, 3, rng)), JudgeSettings(max_tv=0.1))
    assert few.outcome == "TOO_FEW" and "draw more" in few.sentence
    none = judge(build_tree(arm(m, 5, 3, rng)), build_tree(arm(m, 5, 3, rng)))
    assert none.outcome == "TOO_FEW" and none.family == 0


def test_settings_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="alpha"):
        JudgeSettings(alpha=1.5)
    with pytest.raises(ValueError, match="min_count"):
        JudgeSettings(min_count=1)


def test_an_excess_spread_over_rare_tokens_is_still_named_by_one_token() -> None:
    """Pooled columns hide which token grew; the over-represented token comes from the unpooled counts."""
    base = [Draw("p", k, (1,), True) for k in range(60)] + [Draw("p", k, (2,), True) for k in range(60, 100)]
    cand = [Draw("p", k, (1,), True) for k in range(30)] + [Draw("p", k, (2,), True) for k in range(30, 70)]
    cand += [Draw("p", k, (10 + k % 9,), True) for k in range(70, 100)]  # 30 draws over nine rare tokens, 14 most
    cand += [Draw("p", 200 + k, (14,), True) for k in range(3)]
    v = judge(build_tree(base), build_tree(cand), JudgeSettings(min_count=20))
    root = next(n for n in v.nodes if n.prefix == ())
    assert OTHER in root.test.outcomes and root.over_represented == 14
