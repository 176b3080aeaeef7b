"""Paired statistics for original vs perturbed scores.

One module, so a task's aggregation in lmms-eval and the post-hoc report compute the same numbers
from the same per-item correctness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import beta, binom, binomtest, fisher_exact

DEFAULT_RESAMPLES = 10_000
# Below this many items on either side, a subset comparison reports counts but no verdict.
MIN_SUBSET = 10
VARIANCE_PSEUDO = 0.5  # pseudo-counts per group for the variance behind an effective sample size
DETECTION_POWER = 0.8  # the power at which the report states the smallest drop a verdict could have missed


def stable_seed(*parts: str) -> int:
    """A seed that is the same in every process and run (Python's hash() is salted per process)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def accuracy(correct: Sequence[float], strata: Sequence[str] | None = None) -> float:
    """Plain mean, or the macro average over strata (MMStar averages its l2 categories)."""
    values = np.asarray(correct, dtype=float)
    if values.size == 0:
        return float("nan")
    if strata is None:
        return float(values.mean())
    labels = np.asarray(strata)
    return float(np.mean([values[labels == label].mean() for label in np.unique(labels)]))


def mcnemar_exact_p(original: Sequence[int], perturbed: Sequence[int]) -> float:
    """Two-sided exact McNemar test: a binomial test on the discordant pairs (NaN without pairs)."""
    if len(original) == 0:
        return float("nan")
    right_to_wrong, wrong_to_right = discordant_counts(original, perturbed)
    n = right_to_wrong + wrong_to_right
    if n == 0:
        return 1.0
    return float(binomtest(right_to_wrong, n, 0.5, alternative="two-sided").pvalue)


def _fewest_losses_rejected(alpha: float, n: int) -> np.ndarray:
    """For each count k = 0..n of discordant pairs, the fewest pairs lost (right to wrong) at which the two-sided
    exact McNemar test rejects at `alpha` in the direction of a drop (k + 1 where it never does)."""
    k = np.arange(n + 1)
    fewest = np.maximum(binom.isf(alpha / 2, k, 0.5).astype(np.int64) + 1, k // 2 + 1)  # P(X >= l) <= alpha / 2
    p_value = np.minimum(1.0, 2 * binom.sf(fewest - 1, k, 0.5))
    return fewest + (p_value >= alpha)  # at exactly alpha (a dyadic alpha) the test needs one pair more


def _power(fewest: np.ndarray, drop: float, discordant: float) -> float:
    n = len(fewest) - 1
    share = max(discordant, drop)
    if share <= 0:
        return 0.0
    k = np.arange(n + 1)
    rejected = binom.sf(fewest - 1, k, min(1.0, (1 + drop / share) / 2))  # given k discordant, a lost share
    return float(np.sum(binom.pmf(k, n, share) * rejected))


def drop_power(n: int, drop: float, discordant: float, alpha: float) -> float:
    """The chance that the exact McNemar test flags a drop of `drop` (pairs lost minus pairs gained, as a share of
    the n pairs) when a share max(`discordant`, `drop`) of the pairs is answered differently."""
    return _power(_fewest_losses_rejected(alpha, n), drop, discordant)


def minimum_detectable_drop(n: int, discordant: float, alpha: float, power: float = DETECTION_POWER) -> float | None:
    """The smallest drop (as a share of the n pairs) the exact McNemar test flags with `power` at `alpha`, when a
    share `discordant` of the pairs is answered differently (or the drop's own share, if larger): how small a
    drop a verdict of no evidence could have missed. None where no drop at all reaches that power at this n."""
    if n <= 0:
        return None
    fewest = _fewest_losses_rejected(alpha, n)  # the same test at every drop tried
    if _power(fewest, 1.0, discordant) < power:
        return None
    low, high = 0.0, 1.0
    while high - low > 1e-5:
        middle = (low + high) / 2
        low, high = (low, middle) if _power(fewest, middle, discordant) >= power else (middle, high)
    return high


def above_chance_p(correct: Sequence[int], chance: Sequence[float]) -> float:
    """One-sided exact p of at least this many right answers when item i is guessed right with chance[i].

    The count of right guesses over items with different option counts is Poisson-binomial; its
    distribution is built by convolution, one item at a time.
    """
    hits = int(np.sum(np.asarray(correct, dtype=int)))
    probabilities = np.asarray(chance, dtype=float)
    if probabilities.size != len(correct):
        raise ValueError(f"{len(correct)} outcomes but {probabilities.size} chance rates")
    distribution = np.zeros(probabilities.size + 1)
    distribution[0] = 1.0
    for k, p in enumerate(probabilities, 1):
        distribution[1 : k + 1] = distribution[1 : k + 1] * (1 - p) + distribution[:k] * p
        distribution[0] *= 1 - p
    return float(min(1.0, distribution[hits:].sum()))


def discordant_counts(original: Sequence[int], perturbed: Sequence[int]) -> tuple[int, int]:
    """(right on the original and wrong on its counterfactual, the reverse)."""
    a = np.asarray(original, dtype=bool)
    b = np.asarray(perturbed, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length: {a.shape} vs {b.shape}")
    return int(np.sum(a & ~b)), int(np.sum(~a & b))


def clopper_pearson(successes, trials, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The exact binomial interval, from beta quantiles, so effective (non-integer) counts are allowed."""
    x, n = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (successes, trials)))
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x <= 0, 0.0, beta.ppf(tail, np.maximum(x, 1e-12), n - x + 1))
        high = np.where(x >= n, 1.0, beta.ppf(1 - tail, x + 1, np.maximum(n - x, 1e-12)))
    return low, high


def _regularised(successes: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """Each group's rate for its variance, with half a pseudo-success and half a pseudo-failure, so a group all
    right or all wrong (or of one item) still has some."""
    return (successes + VARIANCE_PSEUDO) / (trials + 2 * VARIANCE_PSEUDO)


def _weighted_variance(rate: np.ndarray, trials: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The variance of sum(weight * rate) over independent groups of binomial draws."""
    return (weight**2 * rate * (1 - rate) / trials).sum(axis=-1)


def _recovered(first: np.ndarray, second: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """MOVER: the distance from a difference to its limit, from its two terms' distances to theirs."""
    return np.sqrt(np.maximum(first**2 + second**2 - 2 * correlation * first * second, 0))


def weighted_rate_interval(successes, trials, weight, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Interval of sum(weight * successes / trials) over groups (last axis; leading axes are independent data
    sets, as in a coverage simulation).

    One group is Clopper-Pearson's exact interval. Several (a macro average over strata) use their effective
    sample size: the count whose binomial variance is the weighted estimate's, capped at the items there are
    (Korn and Graubard's construction), then the exact interval on it. It never leaves [0, 1].
    """
    x, n, w = (np.asarray(v, dtype=float) for v in (successes, trials, weight))
    estimate = (w * x / n).sum(axis=-1)
    rate = _regularised(x, n)
    pooled = (w * rate).sum(axis=-1)
    effective = np.minimum(pooled * (1 - pooled) / _weighted_variance(rate, n, w), n.sum(axis=-1))
    return clopper_pearson(estimate * effective, effective, confidence)


def delta_interval(right_to_wrong, wrong_to_right, pairs, weight, confidence: float = 0.95):
    """The CI of a weighted sum of groups' paired deltas, from each group's counts (groups on the last axis;
    leading axes are independent data sets, as in a coverage simulation).

    The delta is the rate of pairs gained minus the rate lost. Each rate gets its exact interval
    (`weighted_rate_interval`) and the two are combined by recovering their variances from the limits (Zou and
    Donner's MOVER, Newcombe's construction for paired proportions), with the negative correlation of two cells of
    one multinomial. It stays inside [-1, 1] and, unlike a normal interval, keeps its coverage at small n and
    near 0 and 1 (docs/results/interval-coverage.md).
    """
    b, c, n, w = (np.asarray(x, dtype=float) for x in (right_to_wrong, wrong_to_right, pairs, weight))
    lost, gained = (w * b / n).sum(axis=-1), (w * c / n).sum(axis=-1)
    lost_low, lost_high = weighted_rate_interval(b, n, w, confidence)
    gained_low, gained_high = weighted_rate_interval(c, n, w, confidence)
    rate_lost, rate_gained = _regularised(b, n), _regularised(c, n)
    covariance = -(w**2 * rate_lost * rate_gained / n).sum(axis=-1)
    r = covariance / np.sqrt(_weighted_variance(rate_lost, n, w) * _weighted_variance(rate_gained, n, w))
    delta = gained - lost
    low = delta - _recovered(gained - gained_low, lost_high - lost, r)
    high = delta + _recovered(gained_high - gained, lost - lost_low, r)
    return np.clip(low, -1.0, 1.0), np.clip(high, -1.0, 1.0)


def _strata_counts(strata: Sequence[str] | None, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each item's stratum number, the strata's sizes and their weights in a macro average (one stratum without
    strata)."""
    labels = np.zeros(size, dtype=int) if strata is None else np.unique(np.asarray(strata), return_inverse=True)[1]
    sizes = np.bincount(labels)
    return labels, sizes, np.full(sizes.size, 1 / sizes.size)


def paired_delta_ci(
    original: Sequence[float],
    perturbed: Sequence[float],
    strata: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """CI of accuracy(perturbed) - accuracy(original) over 0/1 pairs, macro-averaged over strata as the
    benchmark averages them."""
    a, b = np.asarray(original, dtype=int), np.asarray(perturbed, dtype=int)
    if a.size == 0:
        return float("nan"), float("nan")
    labels, sizes, weights = _strata_counts(strata, a.size)
    lost = np.bincount(labels, weights=a & (1 - b), minlength=sizes.size)
    gained = np.bincount(labels, weights=(1 - a) & b, minlength=sizes.size)
    low, high = delta_interval(lost, gained, sizes, weights, confidence)
    return float(low), float(high)


@dataclass(frozen=True)
class PairedComparison:
    n_pairs: int
    acc_original: float
    acc_perturbed: float
    delta: float
    ci_low: float
    ci_high: float
    mcnemar_p: float
    right_to_wrong: int
    wrong_to_right: int

    def as_dict(self) -> dict:
        return asdict(self)


def compare_paired(
    pair_ids: Sequence[str],
    original: Sequence[int],
    perturbed: Sequence[int],
    strata: Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
) -> PairedComparison:
    """Everything the verdict needs from one model on one benchmark (NaN figures without pairs).

    Pairs are put in id order first, so nothing depends on the order the harness scored them in.
    """
    order = np.argsort(np.asarray(pair_ids, dtype=str), kind="stable")
    a = np.asarray(original, dtype=int)[order]
    b = np.asarray(perturbed, dtype=int)[order]
    s = None if strata is None else np.asarray(strata)[order]
    acc_a, acc_b = accuracy(a, s), accuracy(b, s)
    low, high = paired_delta_ci(a, b, s, confidence)
    right_to_wrong, wrong_to_right = discordant_counts(a, b)
    return PairedComparison(
        n_pairs=len(order),
        acc_original=acc_a,
        acc_perturbed=acc_b,
        delta=acc_b - acc_a,
        ci_low=low,
        ci_high=high,
        mcnemar_p=mcnemar_exact_p(a, b),
        right_to_wrong=right_to_wrong,
        wrong_to_right=wrong_to_right,
    )


# NaturalBench scores a group of two questions x two images; a unit counts only when all of its
# documents are present, so subsets and --limit give honest (smaller-n) group metrics.
GROUP_UNITS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Q_Acc": (("q0_i0", "q0_i1"), ("q1_i0", "q1_i1")),
    "I_Acc": (("q0_i0", "q1_i0"), ("q0_i1", "q1_i1")),
    "G_Acc": (("q0_i0", "q0_i1", "q1_i0", "q1_i1"),),
}


def group_accuracies(correct_by_group: dict[str, dict[str, int]]) -> dict[str, float]:
    """Acc, Q_Acc, I_Acc and G_Acc from {group id: {slot: 0/1}}."""
    all_values = [value for slots in correct_by_group.values() for value in slots.values()]
    scores = {"Acc": float(np.mean(all_values)) if all_values else float("nan")}
    for metric, units in GROUP_UNITS.items():
        outcomes = [
            all(slots[s] for s in unit)
            for slots in correct_by_group.values()
            for unit in units
            if all(s in slots for s in unit)
        ]
        scores[metric] = float(np.mean(outcomes)) if outcomes else float("nan")
    return scores


def accuracy_ci(
    correct: Sequence[int], strata: Sequence[str] | None = None, confidence: float = 0.95
) -> tuple[float, float]:
    """CI of one side's accuracy, a plain mean or the macro average over strata (inside [0, 1])."""
    right = np.asarray(correct, dtype=int)
    if right.size == 0:
        return float("nan"), float("nan")
    labels, sizes, weights = _strata_counts(strata, right.size)
    hits = np.bincount(labels, weights=right, minlength=sizes.size)
    low, high = weighted_rate_interval(hits, sizes, weights, confidence)
    return float(low), float(high)


@dataclass(frozen=True)
class SubsetComparison:
    """Accuracy on contaminated (flagged) items against the clean ones: two independent samples."""

    n_flagged: int
    n_clean: int
    acc_flagged: float
    acc_clean: float
    gap: float  # acc_flagged - acc_clean: > 0 means the score leans on the contaminated part
    ci_low: float
    ci_high: float
    p_value: float  # Fisher's exact test, two-sided

    def verdict(self, alpha: float = 0.05) -> str:
        if min(self.n_flagged, self.n_clean) < MIN_SUBSET:
            return f"too few items to say ({self.n_flagged} flagged, {self.n_clean} clean; needs {MIN_SUBSET} each)"
        if self.p_value >= alpha:
            return "no significant gap"
        return "higher on contaminated items" if self.gap > 0 else "lower on contaminated items"


def compare_subsets(
    item_ids: Sequence[str],
    correct: Sequence[int],
    flagged: Sequence[bool],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
) -> SubsetComparison:
    """Gap, bootstrap CI and exact test between the flagged and the clean items.

    Each side is resampled on its own (they are different items). For 0/1 scores the bootstrap
    mean of n draws with replacement is Binomial(n, acc)/n exactly, so that is what is drawn. The
    seed comes from the sorted ids: the result does not depend on the harness's order.
    """
    right = np.asarray(correct, dtype=float)
    if not np.isin(right, (0, 1)).all():
        raise ValueError("compare_subsets needs 0/1 correctness")
    right = right.astype(int)
    mask = np.asarray(flagged, dtype=bool)
    n_flagged, n_clean = int(mask.sum()), int((~mask).sum())
    hits_flagged, hits_clean = int(right[mask].sum()), int(right[~mask].sum())
    nan = float("nan")
    acc_flagged = hits_flagged / n_flagged if n_flagged else nan
    acc_clean = hits_clean / n_clean if n_clean else nan
    if not (n_flagged and n_clean):
        return SubsetComparison(
            n_flagged=n_flagged,
            n_clean=n_clean,
            acc_flagged=acc_flagged,
            acc_clean=acc_clean,
            gap=nan,
            ci_low=nan,
            ci_high=nan,
            p_value=nan,
        )
    rng = np.random.default_rng(stable_seed("subset-bootstrap", *sorted(map(str, item_ids))))
    gaps = rng.binomial(n_flagged, acc_flagged, n_resamples) / n_flagged
    gaps -= rng.binomial(n_clean, acc_clean, n_resamples) / n_clean
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(gaps, [tail, 100.0 - tail])
    table = [[hits_flagged, n_flagged - hits_flagged], [hits_clean, n_clean - hits_clean]]
    p_value = float(fisher_exact(table).pvalue)
    return SubsetComparison(
        n_flagged=n_flagged,
        n_clean=n_clean,
        acc_flagged=acc_flagged,
        acc_clean=acc_clean,
        gap=acc_flagged - acc_clean,
        ci_low=float(low),
        ci_high=float(high),
        p_value=p_value,
    )


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control across benchmarks)."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    m = p.size
    adjusted = np.empty(m)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()
