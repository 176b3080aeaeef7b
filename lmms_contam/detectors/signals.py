"""Each peer detector's signal from per-document records: one module, so a task's metrics and the
report's detector comparison are the same numbers.

Records are the `ContamRecord`s the plugin's tasks log (item_id, variant, correct, stratum, n_options
are read here). Variants: `rotation<r>` for CircularEval (`unrotated` for an item it leaves out, asked once
in its own order; `rotation0` and `all_rotations` where a harness gives only its own per-item result),
`original_order`/`shuffled` for the option shuffle, `text_only` for the image withheld.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from loguru import logger

from lmms_contam import stats
from lmms_contam.records import ContamRecord

CIRCULAR = "circular"
OPTION_SHUFFLE = "option_shuffle"
TEXT_ONLY = "text_only"
UNROTATED = "unrotated"  # an item CircularEval leaves out (options that name option letters), asked once
ALL_ROTATIONS = "all_rotations"  # right when every rotation was: VLMEvalKit's own CircularEval result of an item
DETECTORS = (CIRCULAR, OPTION_SHUFFLE, TEXT_ONLY)

LABELS = {CIRCULAR: "CircularEval", OPTION_SHUFFLE: "option shuffle", TEXT_ONLY: "text-only"}
# What each detector compares, for the report.
DESCRIPTIONS = {
    CIRCULAR: "accuracy when every rotation of the options must be right, minus accuracy in the original order",
    OPTION_SHUFFLE: "accuracy with options shuffled so the gold moves, minus accuracy in the original order",
    TEXT_ONLY: "accuracy with the image withheld, minus chance (1 / options)",
}


@dataclass(frozen=True)
class DetectorSignal:
    detector: str
    n_items: int
    reference: float  # accuracy in the original order, or chance for text-only
    score: float  # circular accuracy, accuracy with shuffled options, or accuracy without the image
    p_value: float  # exact McNemar against the reference; one-sided Poisson-binomial for text-only
    n_changed: int  # right in the original order but not under rotation/shuffle; text-only: items right
    n_excluded: int = 0  # CircularEval: items asked once, unrotated (counted in both accuracies)
    baseline: str = ""  # text-only: the base LLM whose text-only run is the reference; "" for chance

    @property
    def signal(self) -> float:
        return self.score - self.reference

    def flagged(self, alpha: float = 0.05) -> bool:
        """Order detectors flag a significant drop; text-only flags a significant gain over chance."""
        direction = self.signal > 0 if self.detector == TEXT_ONLY else self.signal < 0
        return bool(direction and self.p_value < alpha)

    @property
    def multimodal_leakage(self) -> float | None:
        """MMStar's ML = max(0, S_wv - S_t), defined only against the base LLM's text-only score."""
        return max(0.0, self.signal) if self.baseline else None

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


def _strata(first_versions: list[ContamRecord]) -> list[str] | None:
    strata = [record.stratum for record in first_versions]
    return strata if all(strata) else None


def _order_signal(
    detector: str,
    items: dict[str, Versions],
    reference: Callable[[Versions], ContamRecord],
    changed: Callable[[Versions], int],
    n_excluded: int = 0,
) -> DetectorSignal:
    first = [reference(versions) for versions in items.values()]
    comparison = stats.compare_paired(
        list(items), [r.correct for r in first], [changed(v) for v in items.values()], _strata(first)
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


def circular(records: Iterable[ContamRecord]) -> DetectorSignal:
    """CircularEval: an item counts only if every rotation of its options is answered right; an item it
    leaves out counts as VLMEvalKit counts it, by its one unrotated answer."""

    def complete(versions: Versions) -> bool:
        n = next(iter(versions.values())).n_options
        return set(versions) in ({f"rotation{r}" for r in range(n)}, {UNROTATED}, {"rotation0", ALL_ROTATIONS})

    items = versions_by_item(records, complete)
    return _order_signal(
        CIRCULAR,
        items,
        lambda versions: versions.get("rotation0") or versions[UNROTATED],
        lambda versions: int(all(r.correct for r in versions.values())),
        sum(UNROTATED in versions for versions in items.values()),
    )


def option_shuffle(records: Iterable[ContamRecord]) -> DetectorSignal:
    """MM-Detect's option-order sensitivity: the same item with its options shuffled so the gold moves."""
    items = versions_by_item(records, lambda versions: set(versions) == {"original_order", "shuffled"})
    return _order_signal(
        OPTION_SHUFFLE,
        items,
        lambda versions: versions["original_order"],
        lambda versions: versions["shuffled"].correct,
    )


def text_only(records: Iterable[ContamRecord]) -> DetectorSignal:
    """MMStar-style leakage: right answers without the image, against guessing among the options."""
    items = versions_by_item(records, lambda versions: set(versions) == {TEXT_ONLY})
    kept = [versions[TEXT_ONLY] for versions in items.values()]
    correct = [r.correct for r in kept]
    chance = [1.0 / r.n_options for r in kept]
    n = len(kept)
    return DetectorSignal(
        detector=TEXT_ONLY,
        n_items=n,
        reference=sum(chance) / n if n else float("nan"),
        score=sum(correct) / n if n else float("nan"),
        p_value=stats.above_chance_p(correct, chance),
        n_changed=sum(correct),
    )


def text_only_against(
    records: Iterable[ContamRecord], baseline_records: Iterable[ContamRecord], baseline: str
) -> DetectorSignal:
    """MMStar's multi-modal leakage as its paper defines it: the model's accuracy without the image (S_wv)
    against its base LLM's text-only accuracy (S_t) on the same items, plain averages; exact McNemar on the
    paired answers. Items the baseline run lacks are left out with a warning."""
    ours = versions_by_item(records, lambda versions: set(versions) == {TEXT_ONLY})
    theirs = versions_by_item(baseline_records, lambda versions: set(versions) == {TEXT_ONLY})
    shared = sorted(set(ours) & set(theirs))
    if len(shared) < len(ours):
        logger.warning(
            f"lmms-contam: the text-only baseline {baseline} lacks {len(ours) - len(shared)} of the "
            f"{len(ours)} item(s); the comparison uses the {len(shared)} in both"
        )
    comparison = stats.compare_paired(
        shared, [theirs[i][TEXT_ONLY].correct for i in shared], [ours[i][TEXT_ONLY].correct for i in shared]
    )
    return DetectorSignal(
        detector=TEXT_ONLY,
        n_items=comparison.n_pairs,
        reference=comparison.acc_original,
        score=comparison.acc_perturbed,
        p_value=comparison.mcnemar_p,
        n_changed=sum(ours[i][TEXT_ONLY].correct for i in shared),
        baseline=baseline,
    )


SIGNALS: dict[str, Callable[[Iterable[ContamRecord]], DetectorSignal]] = {
    CIRCULAR: circular,
    OPTION_SHUFFLE: option_shuffle,
    TEXT_ONLY: text_only,
}


def detector_of(variant: str) -> str:
    """Which detector a record's variant belongs to."""
    if variant.startswith("rotation") or variant in (UNROTATED, ALL_ROTATIONS):
        return CIRCULAR
    if variant in ("original_order", "shuffled"):
        return OPTION_SHUFFLE
    if variant == TEXT_ONLY:
        return TEXT_ONLY
    raise ValueError(f"variant {variant!r} belongs to no peer detector")


def signal_of(records: Iterable[ContamRecord]) -> DetectorSignal:
    """The signal of the one detector whose records these are."""
    records = list(records)
    found = {detector_of(r.variant) for r in records}
    if len(found) != 1:
        raise ValueError(f"records of one detector expected, found {sorted(found) or 'none'}")
    return SIGNALS[found.pop()](records)
