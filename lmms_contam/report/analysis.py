"""From scored items to a verdict per model and benchmark, with the evidence behind it."""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field

from lmms_contam import flags, stats
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.detectors.signals import DetectorSignal
from lmms_contam.report.benchmark_rates import BenchmarkRates
from lmms_contam.report.inputs import DetectorRun, ModelBenchmark, ScannedRun, ScoredItem
from lmms_contam.report.names import display_names
from lmms_contam.report.set_status import SetStatus

CONTAMINATED = "contaminated"
NO_EVIDENCE = "no evidence"
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class CategoryDelta:
    name: str
    n: int
    acc_original: float
    acc_perturbed: float
    ci_low: float  # the paired delta's 95% interval within the category
    ci_high: float

    @property
    def delta(self) -> float:
        return self.acc_perturbed - self.acc_original

    @property
    def excludes_zero(self) -> bool:
        """Whether the category's own interval rules out no change (uncorrected for the many categories)."""
        return self.ci_high < 0 or self.ci_low > 0


@dataclass(frozen=True)
class FlaggedItem:
    """Right on the original, wrong on its counterfactual: what memorisation looks like per item."""

    original: ScoredItem
    perturbed: ScoredItem


@dataclass
class BenchmarkResult:
    model: str
    benchmark: str
    comparison: stats.PairedComparison
    ci_original: tuple[float, float]
    ci_perturbed: tuple[float, float]
    categories: list[CategoryDelta]
    group_metrics: dict[str, dict[str, float]]
    flagged: list[FlaggedItem]
    sources: dict[str, str]
    host: str = ""  # the harness that ran the model
    matching: str = ""  # how its replies were judged right or wrong
    p_adjusted: float = float("nan")
    verdict: str = INCONCLUSIVE
    notes: list[str] = field(default_factory=list)  # what a reader of the verdict should know about the runs
    scored_set: SetStatus | None = None  # whether the set it was scored on was verified
    averages_strata: bool = False  # its accuracies are macro averages over the categories, as its host's are
    interval_vs_test: str = ""  # where the drawn interval and the verdict's test disagree: which governs, and why
    # The smallest drop (share of the pairs) its test flags with 80% power at this n and discordance, at Holm's
    # strictest step (alpha / the model's benchmarks); None where no drop can be at this n.
    minimum_detectable_drop: float | None = None


def analyse(entry: ModelBenchmark) -> BenchmarkResult:
    ids = sorted(entry.items)
    original = [entry.items[i]["original"] for i in ids]
    perturbed = [entry.items[i]["perturbed"] for i in ids]
    strata = [item.stratum for item in original]
    strata_or_none = strata if all(strata) and entry.averages_strata else None
    comparison = stats.compare_paired(
        ids, [o.correct for o in original], [p.correct for p in perturbed], strata_or_none
    )
    return BenchmarkResult(
        model=entry.model,
        benchmark=entry.benchmark,
        comparison=comparison,
        ci_original=stats.accuracy_ci([o.correct for o in original], strata_or_none),
        ci_perturbed=stats.accuracy_ci([p.correct for p in perturbed], strata_or_none),
        categories=_category_deltas(original, perturbed) if all(strata) else [],
        group_metrics=_group_metrics(original, perturbed),
        flagged=[FlaggedItem(o, p) for o, p in zip(original, perturbed, strict=True) if o.correct and not p.correct],
        sources=dict(entry.sources),
        host=entry.host,
        matching=entry.matching,
        notes=list(entry.notes),
        averages_strata=strata_or_none is not None,
    )


def _category_deltas(original: list[ScoredItem], perturbed: list[ScoredItem]) -> list[CategoryDelta]:
    by_category: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for o, p in zip(original, perturbed, strict=True):
        by_category[o.stratum].append((o.correct, p.correct))
    deltas = []
    for name, pairs in sorted(by_category.items()):
        original_correct, perturbed_correct = zip(*pairs, strict=True)
        low, high = stats.paired_delta_ci(original_correct, perturbed_correct)
        deltas.append(
            CategoryDelta(
                name=name,
                n=len(pairs),
                acc_original=sum(original_correct) / len(pairs),
                acc_perturbed=sum(perturbed_correct) / len(pairs),
                ci_low=low,
                ci_high=high,
            )
        )
    return deltas


def _group_metrics(original: list[ScoredItem], perturbed: list[ScoredItem]) -> dict[str, dict[str, float]]:
    """NaturalBench's G/Q/I accuracy for each version (empty for benchmarks without groups)."""
    if not all(item.group for item in original):
        return {}
    metrics = {}
    for variant, items in (("original", original), ("perturbed", perturbed)):
        by_group: dict[str, dict[str, int]] = defaultdict(dict)
        for item in items:
            by_group[item.group][item.slot] = item.correct
        metrics[variant] = stats.group_accuracies(by_group)
    return metrics


def decide(results: list[BenchmarkResult], alpha: float = 0.05) -> list[BenchmarkResult]:
    """Verdicts with Holm's correction across each model's benchmarks."""
    by_model: dict[str, list[BenchmarkResult]] = defaultdict(list)
    for result in results:
        by_model[result.model].append(result)
    for model_results in by_model.values():
        adjusted = stats.holm_adjust([r.comparison.mcnemar_p for r in model_results])
        for result, p in zip(model_results, adjusted, strict=True):
            result.p_adjusted = p
            if result.comparison.delta >= 0:
                result.verdict = NO_EVIDENCE
            elif p < alpha:
                result.verdict = CONTAMINATED
            else:
                result.verdict = INCONCLUSIVE
            result.interval_vs_test = interval_vs_test(result, len(model_results), alpha)
            c = result.comparison
            discordant = (c.right_to_wrong + c.wrong_to_right) / c.n_pairs if c.n_pairs else 0.0
            result.minimum_detectable_drop = stats.minimum_detectable_drop(
                c.n_pairs, discordant, alpha / len(model_results)
            )
    return results


def interval_vs_test(result: BenchmarkResult, benchmarks: int, alpha: float) -> str:
    """One line where the delta's interval and the verdict disagree, saying that the test governs and why they
    differ; empty where they agree."""
    c = result.comparison
    excludes_a_drop = c.ci_high < 0
    if (result.verdict == CONTAMINATED) == excludes_a_drop or result.verdict == NO_EVIDENCE:
        return ""
    interval = f"[{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}] points"
    discordant = c.right_to_wrong + c.wrong_to_right
    if result.verdict == INCONCLUSIVE and c.mcnemar_p < alpha <= result.p_adjusted:
        why = (
            f"the test is corrected for this model's {benchmarks} benchmarks (p {c.mcnemar_p:.3g} becomes "
            f"{result.p_adjusted:.3g} with Holm's correction), the interval is not"
        )
    else:
        why = (
            f"the test is exact on the {discordant} pairs answered differently (Holm p {result.p_adjusted:.3g}); "
            f"the interval combines exact intervals of the rates lost and gained"
            + (", macro-averaged over the categories as the accuracy is" if result.averages_strata else "")
        )
    seen = (
        "holds 0, but the verdict is contaminated"
        if result.verdict == CONTAMINATED
        else "excludes 0, but the verdict is inconclusive"
    )
    return f"The delta's 95% interval {interval} {seen}: the exact McNemar test governs; {why}."


@dataclass(frozen=True)
class DetectorResult:
    """A peer detector's signal for one model and benchmark, shown beside the perturbation verdict."""

    model: str
    benchmark: str
    signal: DetectorSignal
    source: str

    @property
    def detector(self) -> str:
        return self.signal.detector


def analyse_detector(run: DetectorRun, baselines: dict[tuple[str, str], DetectorRun] | None = None) -> DetectorResult:
    """`baselines`: per (detector, benchmark), another model's run of the same versions (a base LLM's text-only
    run, MMStar's definition; a clean reference model's masked-option or circular run), measured against instead of the
    detector's own reference."""
    detector = DETECTORS[run.detector]
    baseline = (baselines or {}).get((run.detector, run.benchmark)) if detector.baseline else None
    if baseline is None:
        signal = detector.signal(run.records, averages_strata=run.averages_strata)
    else:
        signal = detector.baseline.signal(run.records, baseline.records, baseline.model)
    return DetectorResult(model=run.model, benchmark=run.benchmark, signal=signal, source=run.source)


@dataclass(frozen=True)
class ScannedResult:
    """Does the model's score lean on the contaminated items? Flagged against clean, per kind of flag."""

    model: str
    benchmark: str
    n_items: int
    accuracy: float  # plain accuracy over every scored item (the benchmark's own score may weigh otherwise)
    rates: dict[str, float]  # kind -> rate among the evaluated items (NaN: not scanned / not judged)
    subsets: dict[str, stats.SubsetComparison]  # kind -> flagged vs clean
    n_unscanned: int
    n_unjudged: int
    judged: bool
    source: str


def analyse_scanned(run: ScannedRun) -> ScannedResult:
    records = run.records
    kinds = (flags.IMAGE_ONLY, flags.IMAGE_TEXT)
    return ScannedResult(
        model=run.model,
        benchmark=run.benchmark,
        n_items=len(records),
        accuracy=stats.accuracy([r["correct"] for r in records]),
        rates={kind: flags.rate(records, kind) for kind in kinds},
        subsets={kind: flags.subset_comparison(records, kind) for kind in kinds},
        n_unscanned=sum(r[flags.IMAGE_ONLY] == flags.UNSCANNED for r in records),
        n_unjudged=sum(r[flags.IMAGE_TEXT] == flags.UNJUDGED for r in records),
        judged=any(r[flags.IMAGE_TEXT] not in (flags.NO_JUDGE, flags.UNSCANNED) for r in records),
        source=run.source,
    )


@dataclass(frozen=True)
class Analysed:
    results: list[BenchmarkResult]  # semantic perturbation, with verdicts
    detectors: list[DetectorResult]
    alpha: float
    rates: list[BenchmarkRates] = field(default_factory=list)  # of the benchmarks, from scans and judges
    scanned: list[ScannedResult] = field(default_factory=list)  # flagged vs clean accuracy per model

    @functools.cached_property
    def names(self) -> dict[str, str]:
        """Each model's short display name (report/names.py), by its full identity."""
        models = {r.model for r in self.results} | {d.model for d in self.detectors} | {r.model for r in self.scanned}
        return display_names(sorted(models))
