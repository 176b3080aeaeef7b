"""A peer detector's signal, and the steps its detectors share to compute one from per-document records.

Records are the `ContamRecord`s the plugin's tasks log (item_id, variant, correct, stratum, n_options are
read here); each detector's module says which variants are its versions and how they combine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from loguru import logger

from lmms_contam import stats
from lmms_contam.records import ContamRecord

# What a detector's lmms-eval metrics report, in order (Detector.metrics names them).
DETECTOR_FIELDS = ("reference", "score", "signal", "p_value", "n_items", "n_changed", "n_excluded")


@dataclass(frozen=True)
class DetectorSignal:
    detector: str
    n_items: int
    # accuracy in the original order, or chance for text-only; against another model's run (`baseline`), that
    # model's figure: its accuracy, or for CircularEval its drop
    reference: float
    score: float  # circular accuracy, accuracy with shuffled options, or accuracy without the image; or the drop
    p_value: float  # exact McNemar against the reference; one-sided Poisson-binomial for text-only
    n_changed: int  # right in the original order but not under rotation/shuffle; text-only: items right
    n_excluded: int = 0  # CircularEval: items asked once, unrotated (counted in both accuracies)
    baseline: str = ""  # the model whose run is the reference (text-only: the base LLM); "" for none
    flags_a_gain: bool = False  # text-only: answers right beyond the reference are the evidence, not a drop
    # text-only against its base LLM's run: the gain is MMStar's multi-modal leakage (the detector says so)
    gain_is_leakage: bool = False

    @property
    def signal(self) -> float:
        return self.score - self.reference

    def flagged(self, alpha: float = 0.05) -> bool:
        """A significant drop (order detectors) or a significant gain (`flags_a_gain`: text-only)."""
        direction = self.signal > 0 if self.flags_a_gain else self.signal < 0
        return bool(direction and self.p_value < alpha)

    @property
    def multimodal_leakage(self) -> float | None:
        """MMStar's ML = max(0, S_wv - S_t), defined only against the base LLM's text-only score."""
        return max(0.0, self.signal) if self.gain_is_leakage else None

    def as_dict(self) -> dict:
        return {**asdict(self), "signal": self.signal, "multimodal_leakage": self.multimodal_leakage}


Versions = dict[str, ContamRecord]  # an item's records by variant


def versions_by_item(records: Iterable[ContamRecord], complete: Callable[[Versions], bool]) -> dict[str, Versions]:
    """{item id: {variant: record}} for the items whose versions are all there; the rest are counted out
    with a warning (a --limit or partial run), never scored on a missing version."""
    by_item: dict[str, Versions] = defaultdict(dict)
    for record in records:
        by_item[record.item_id][record.variant] = record
    kept = {item: versions for item, versions in sorted(by_item.items()) if complete(versions)}
    if len(kept) < len(by_item):
        logger.warning(
            f"lmms-contam: {len(by_item) - len(kept)} item(s) were scored in only some of their versions "
            f"(--limit or a partial run); the statistics use the {len(kept)} complete item(s)"
        )
    return kept


def _strata(first_versions: list[ContamRecord], averages_strata: bool) -> list[str] | None:
    strata = [record.stratum for record in first_versions]
    return strata if averages_strata and all(strata) else None


def order_signal(
    detector: str,
    items: dict[str, Versions],
    reference: Callable[[Versions], ContamRecord],
    changed: Callable[[Versions], int],
    n_excluded: int = 0,
    averages_strata: bool = True,
) -> DetectorSignal:
    """The signal of a detector that asks an item in other option orders: exact McNemar of the `reference`
    version's answers against `changed` (1 where the item still counts as right); accuracies macro-averaged
    over the records' strata where the host's are (`averages_strata`) and every record has one."""
    first = [reference(versions) for versions in items.values()]
    comparison = stats.compare_paired(
        list(items), [r.correct for r in first], [changed(v) for v in items.values()], _strata(first, averages_strata)
    )
    return DetectorSignal(
        detector=detector,
        n_items=comparison.n_pairs,
        reference=comparison.acc_original,
        score=comparison.acc_perturbed,
        p_value=comparison.mcnemar_p,
        n_changed=comparison.right_to_wrong,
        n_excluded=n_excluded,
    )


def shared_items(detector: str, ours: dict[str, object], theirs: dict[str, object], baseline: str) -> list[str]:
    """The items both runs scored; those the other run lacks are left out with a warning."""
    shared = sorted(set(ours) & set(theirs))
    if len(shared) < len(ours):
        logger.warning(
            f"lmms-contam: the {detector} baseline {baseline} lacks {len(ours) - len(shared)} of the "
            f"{len(ours)} item(s); the comparison uses the {len(shared)} in both"
        )
    return shared


def gain_over_run(
    detector: str, ours: dict[str, ContamRecord], theirs: dict[str, ContamRecord], baseline: str
) -> DetectorSignal:
    """A detector's right answers against another model's on the same items (`ours` and `theirs`: item -> its
    one version's record), plain averages, exact McNemar on the pairs; the evidence is a gain. Items the other
    run lacks are left out with a warning."""
    shared = shared_items(detector, ours, theirs, baseline)
    comparison = stats.compare_paired(shared, [theirs[i].correct for i in shared], [ours[i].correct for i in shared])
    return DetectorSignal(
        detector=detector,
        n_items=comparison.n_pairs,
        reference=comparison.acc_original,
        score=comparison.acc_perturbed,
        p_value=comparison.mcnemar_p,
        n_changed=sum(ours[i].correct for i in shared),
        baseline=baseline,
        flags_a_gain=True,
    )
