import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import binomtest

from lmms_contam import stats


@pytest.mark.parametrize(
    "table",  # (both right, right->wrong, wrong->right, both wrong)
    [(10, 7, 1, 5), (0, 0, 0, 4), (3, 12, 0, 0), (20, 5, 5, 20), (1, 1, 9, 2)],
)
def test_mcnemar_matches_scipy_binomtest_on_discordant_pairs(table):
    both, r2w, w2r, neither = table
    original = [1] * both + [1] * r2w + [0] * w2r + [0] * neither
    perturbed = [1] * both + [0] * r2w + [1] * w2r + [0] * neither
    expected = 1.0 if r2w + w2r == 0 else binomtest(r2w, r2w + w2r, 0.5).pvalue
    assert stats.mcnemar_exact_p(original, perturbed) == pytest.approx(expected)
    assert stats.discordant_counts(original, perturbed) == (r2w, w2r)


def test_accuracy_is_macro_over_strata():
    correct = [1, 1, 1, 0, 0, 0]
    strata = ["a", "a", "a", "a", "b", "b"]
    assert stats.accuracy(correct) == pytest.approx(0.5)
    assert stats.accuracy(correct, strata) == pytest.approx((0.75 + 0.0) / 2)


def test_compare_paired_is_order_independent_and_deterministic():
    rng = np.random.default_rng(1)
    ids = [f"item-{i}" for i in range(200)]
    a = rng.integers(0, 2, 200)
    b = rng.integers(0, 2, 200)
    first = stats.compare_paired(ids, a, b)
    order = rng.permutation(200)
    shuffled = stats.compare_paired([ids[i] for i in order], a[order], b[order])
    assert first == shuffled
    assert first.ci_low <= first.delta <= first.ci_high
    assert first.delta == pytest.approx(b.mean() - a.mean())


def test_stable_seed_is_fixed_across_processes():
    """Python's hash() is salted per process; the seed must not be."""
    code = "from lmms_contam.stats import stable_seed; print(stable_seed('paired-bootstrap', 'a', 'b'))"
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(salt)}).stdout.strip()
        for salt in (1, 2)
    }  # fmt: skip
    assert outputs == {str(stats.stable_seed("paired-bootstrap", "a", "b"))}
    assert stats.stable_seed("a", "b") != stats.stable_seed("ab")


@pytest.mark.parametrize(
    ("original", "perturbed", "strata"),
    [([1] * 8, [0] * 8, None), ([0] * 8, [1] * 8, None), ([1] * 3, [1] * 3, None), ([1], [0], None),
     ([1, 1, 0, 1], [0, 0, 0, 0], ["a", "b", "b", "c"]), ([0, 0, 0], [0, 0, 0], ["a", "a", "b"])],
)  # fmt: skip
def test_intervals_stay_in_range_at_the_extremes(original, perturbed, strata):
    low, high = stats.paired_delta_ci(original, perturbed, strata)
    delta = stats.accuracy(perturbed, strata) - stats.accuracy(original, strata)
    assert -1 <= low <= delta <= high <= 1
    for side in (original, perturbed):
        low, high = stats.accuracy_ci(side, strata)
        assert 0 <= low <= stats.accuracy(side, strata) <= high <= 1 and high > low


def test_one_stratum_accuracy_interval_is_clopper_pearsons():
    for hits, n in ((0, 8), (1, 8), (30, 100), (12, 12)):
        expected = binomtest(hits, n).proportion_ci(0.95, method="exact")
        assert stats.accuracy_ci([1] * hits + [0] * (n - hits)) == pytest.approx((expected.low, expected.high))


def test_lone_pairs_in_their_strata_keep_an_interval_that_is_not_zero_wide():
    """Two pairs alone in their strata, moving in opposite directions: the delta is 0 and uncertain."""
    low, high = stats.paired_delta_ci([1, 0], [0, 1], ["a", "b"])
    assert low < 0 < high and low == pytest.approx(-high)
    # The item-level function is the grouped one on each stratum's counts, strata weighed alike (macro).
    original, perturbed = [1, 1, 0, 1, 0, 0, 1, 0], [0, 1, 0, 1, 1, 0, 1, 1]
    strata = ["x", "x", "x", "y", "y", "y", "lone1", "lone2"]
    grouped = stats.delta_interval([0, 0, 1, 0], [1, 0, 0, 1], [1, 1, 3, 3], [1 / 4] * 4)
    assert stats.paired_delta_ci(original, perturbed, strata) == pytest.approx(grouped)
    assert stats.compare_paired(list("abcdefgh"), original, perturbed, strata).delta == pytest.approx(
        (-1 / 3 + 1 / 3 + 0 + 1) / 4
    )


def test_no_pairs_give_nan_everywhere():
    empty = stats.compare_paired([], [], [])
    assert empty.n_pairs == 0
    assert all(np.isnan(x) for x in (empty.delta, empty.ci_low, empty.ci_high, empty.mcnemar_p))


def test_group_accuracies_match_lmms_eval_builtin_get_scores():
    """On complete groups our by-id metrics equal the built-in NaturalBench scorer's."""
    from lmms_eval.tasks.naturalbench.utils import get_scores  # imported when run: it brings torch

    rng = np.random.default_rng(3)
    slots = ("q0_i0", "q0_i1", "q1_i0", "q1_i1")
    builtin_gold = {"q0_i0": 1, "q0_i1": 0, "q1_i0": 0, "q1_i1": 1}
    correct = {str(g): {s: int(rng.integers(0, 2)) for s in slots} for g in range(50)}
    # The built-in takes parsed answers: gold value when right, the other value when wrong.
    parsed = {g: {s: builtin_gold[s] if c[s] else 1 - builtin_gold[s] for s in slots} for g, c in correct.items()}
    ours = stats.group_accuracies(correct)
    theirs = get_scores(parsed)
    for key in ("Acc", "Q_Acc", "I_Acc", "G_Acc"):
        assert ours[key] == pytest.approx(theirs[key])


def test_group_accuracies_count_only_complete_units():
    scores = stats.group_accuracies({"g": {"q0_i0": 1, "q0_i1": 1, "q1_i0": 0}})
    assert scores["Acc"] == pytest.approx(2 / 3)
    assert scores["Q_Acc"] == 1.0  # only q0 is complete
    assert scores["I_Acc"] == 0.0  # only i0 (q0_i0, q1_i0) is complete
    assert np.isnan(scores["G_Acc"])


def test_holm_adjustment_by_hand():
    # sorted p: 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04, kept monotone)
    assert stats.holm_adjust([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert stats.holm_adjust([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert stats.holm_adjust([0.03]) == pytest.approx([0.03])


def test_subset_gap_by_hand_and_order_free():
    # 12 of 20 flagged right, 10 of 40 clean right.
    ids = [f"i{i}" for i in range(60)]
    correct = [1] * 12 + [0] * 8 + [1] * 10 + [0] * 30
    flagged = [True] * 20 + [False] * 40
    result = stats.compare_subsets(ids, correct, flagged)
    assert (result.n_flagged, result.n_clean) == (20, 40)
    assert (result.acc_flagged, result.acc_clean, result.gap) == pytest.approx((0.6, 0.25, 0.35))
    # Fisher's exact test by hand: hypergeometric tables as or less likely than the observed one.
    from math import comb

    def probability(k: int) -> float:  # k flagged items right, 22 right in all
        return comb(20, k) * comb(40, 22 - k) / comb(60, 22)

    observed = probability(12)
    expected_p = sum(probability(k) for k in range(0, 21) if probability(k) <= observed * (1 + 1e-7))
    assert result.p_value == pytest.approx(expected_p)
    # The normal approximation of the gap's spread: the bootstrap CI should be close to it.
    spread = (0.6 * 0.4 / 20 + 0.25 * 0.75 / 40) ** 0.5
    assert result.ci_low == pytest.approx(0.35 - 1.96 * spread, abs=0.04)
    assert result.ci_high == pytest.approx(0.35 + 1.96 * spread, abs=0.04)
    assert result.verdict() == "higher on contaminated items"
    order = np.random.default_rng(0).permutation(60)
    shuffled = stats.compare_subsets([ids[i] for i in order], [correct[i] for i in order],
                                     [flagged[i] for i in order])  # fmt: skip
    assert shuffled == result


def test_subset_gap_with_too_few_or_no_items():
    few = stats.compare_subsets(["a", "b", "c", "d"], [1, 1, 0, 0], [True, True, False, False])
    assert few.gap == 1.0 and few.verdict().startswith("too few items to say (2 flagged, 2 clean")
    none_flagged = stats.compare_subsets(["a", "b"], [1, 0], [False, False])
    assert np.isnan(none_flagged.gap) and np.isnan(none_flagged.acc_flagged) and none_flagged.acc_clean == 0.5
    with pytest.raises(ValueError, match="0/1"):
        stats.compare_subsets(["a"], [0.5], [True])


@pytest.mark.parametrize("alpha", [0.05, 0.0625, 0.05 / 9])  # 0.0625 = 1/16: some tails equal it exactly
def test_the_power_calculation_rejects_exactly_where_the_exact_mcnemar_test_does(alpha):
    """The detectable drop rests on the fewest pairs lost that the report's test calls a significant drop, for
    every count of discordant pairs: checked against that test itself."""
    from lmms_contam.stats import _fewest_losses_rejected

    fewest = _fewest_losses_rejected(alpha, 60)

    def flags(lost: int, gained: int) -> bool:
        p = stats.mcnemar_exact_p([1] * lost + [0] * gained, [0] * lost + [1] * gained)
        return lost > gained and p < alpha

    for k in range(61):
        rejected = [lost for lost in range(k + 1) if flags(lost, k - lost)]
        assert fewest[k] == (rejected[0] if rejected else k + 1), k
        assert rejected == list(range(fewest[k], k + 1))
