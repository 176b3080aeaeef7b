"""The coverage study of the report's intervals (docs/results/interval-coverage.md), run with the report's own
functions: every interval inside its range and at least 0.93 coverage in every cell. A simulation of ~30 s, kept out
of the unit tier."""

import numpy as np
import pytest

from lmms_contam.lab import interval_coverage


@pytest.fixture(scope="module")
def delta_coverage():
    return [interval_coverage.measure_delta(cell, 2000) for cell in interval_coverage.delta_cells()]


def test_the_accuracy_interval_holds_its_coverage_in_every_cell():
    """n 8-1,000, accuracies 0.02-0.98, one stratum or unequal strata of unequal accuracies: 10,000 simulated
    benchmarks per cell, every interval inside [0, 1], coverage at least 0.93 in the worst cell."""
    measured = [interval_coverage.measure_accuracy(cell, 10_000) for cell in interval_coverage.accuracy_cells()]
    assert len(measured) == 2 * 8 * 7
    assert sum(m.out_of_range for m in measured) == 0
    worst = min(measured, key=lambda m: m.coverage)
    assert worst.coverage >= 0.93, worst
    # Exact where it can be: with one stratum it is never below the nominal 95% by more than the noise of 10,000
    assert min(m.coverage for m in measured if m.cell.design == "one stratum") >= 0.945


def test_the_delta_interval_holds_its_coverage_in_every_cell(delta_coverage):
    """Both sides' accuracies 0.02-0.98, discordance from the least to the most the accuracies allow, n 8-1,000,
    with and without strata: 2,000 benchmarks per cell, every interval inside [-1, 1], coverage >= 0.93."""
    assert len(delta_coverage) == 2 * 8 * 7 * 7 * 3
    assert sum(m.out_of_range for m in delta_coverage) == 0
    worst = min(delta_coverage, key=lambda m: m.coverage)
    assert worst.coverage >= 0.93, worst


def test_the_delta_interval_is_no_wider_than_a_normal_one_at_large_n(delta_coverage):
    """Exactness costs width only where counts are small: at n = 1,000 with 50 or more pairs expected lost and
    50 or more gained (where a normal interval is sound), the interval is within 5% of the normal one's."""
    from scipy.stats import norm

    for m in (m for m in delta_coverage if m.cell.n == 1000 and m.cell.design == "one stratum"):
        p, q = m.cell.acc_original, m.cell.acc_perturbed
        both = max(0.0, p + q - 1) + m.cell.agreement * (min(p, q) - max(0.0, p + q - 1))
        lost, gained = p - both, q - both
        normal = 2 * norm.ppf(0.975) * np.sqrt((lost + gained - (gained - lost) ** 2) / 1000)
        if 1000 * min(lost, gained) >= 50:
            assert m.width <= 1.05 * normal, m


@pytest.mark.parametrize(("n", "discordant", "alpha"), [(24, 0.2, 0.05), (150, 0.1, 0.05), (500, 0.3, 0.025),
                                                        (1000, 0.05, 0.05), (60, 0.0, 0.05)])  # fmt: skip
def test_the_stated_minimum_detectable_drop_is_flagged_with_80_percent_power(n, discordant, alpha):
    """Simulated benchmarks at the stated drop and discordance, each put to the report's own exact McNemar test:
    the share flagged as a drop is 0.8 within its 99% interval (4,000 benchmarks per case)."""
    from scipy.stats import binomtest

    from lmms_contam import stats

    drop = stats.minimum_detectable_drop(n, discordant, alpha)
    assert drop is not None and 0 < drop <= 1
    share = max(discordant, drop)
    rng = np.random.default_rng(int(stats.stable_seed("mde", str(n), str(discordant))))
    counts = rng.multinomial(n, [(share + drop) / 2, (share - drop) / 2, 1 - share], size=4000)
    flagged = 0
    for lost, gained, same in counts:
        original = [1] * lost + [0] * gained + [1] * same
        perturbed = [0] * lost + [1] * gained + [1] * same
        flagged += lost > gained and stats.mcnemar_exact_p(original, perturbed) < alpha
    interval = binomtest(flagged, len(counts)).proportion_ci(0.99, method="exact")
    assert interval.low <= stats.DETECTION_POWER <= interval.high, (flagged, drop)
    # A smaller drop is flagged less often: the stated one is the smallest with that power.
    assert stats.drop_power(n, 0.9 * drop, discordant, alpha) < stats.DETECTION_POWER


def test_no_drop_is_detectable_where_the_benchmark_is_too_small():
    """With 4 pairs even all of them lost is never significant at 0.05 (p = 0.125): no drop is stated."""
    from lmms_contam import stats

    assert stats.minimum_detectable_drop(4, 0.5, 0.05) is None
    assert stats.minimum_detectable_drop(6, 0.5, 0.05) is not None  # all 6 lost: p = 0.031
