"""CircularEval (MMBench): an item counts only if every rotation of its options is answered right.

Variants: `rotation<r>`; `unrotated` for an item it leaves out (options that name option letters), asked once
in its own order and counted by that answer, as VLMEvalKit counts it; `rotation0` and `all_rotations` where a
harness gives only its own per-item result (VLMEvalKit's CircularEval of MMBench).
"""

from __future__ import annotations

from collections.abc import Iterable

from lmms_contam import stats
from lmms_contam.detectors.base import AskedItem, Baseline, Detector, Order
from lmms_contam.detectors.options import names_option_letters, rotations
from lmms_contam.detectors.signals import DetectorSignal, Versions, order_signal, shared_items, versions_by_item
from lmms_contam.records import ContamRecord

CIRCULAR = "circular"
UNROTATED = "unrotated"
ALL_ROTATIONS = "all_rotations"


def rotation_orders(item: AskedItem) -> dict[str, Order | None]:
    if names_option_letters(list(item.options)) and not item.rotate_all:
        return {UNROTATED: tuple(range(len(item.options)))}
    return {f"rotation{r}": order for r, order in enumerate(rotations(len(item.options)))}


def owns(variant: str) -> bool:
    return variant.startswith("rotation") or variant in (UNROTATED, ALL_ROTATIONS)


def _complete(versions: Versions) -> bool:
    n = next(iter(versions.values())).n_options
    return set(versions) in ({f"rotation{r}" for r in range(n)}, {UNROTATED}, {"rotation0", ALL_ROTATIONS})


def _in_order(versions: Versions) -> ContamRecord:
    return versions.get("rotation0") or versions[UNROTATED]


def _every_rotation_right(versions: Versions) -> int:
    return int(all(r.correct for r in versions.values()))


def circular_signal(records: Iterable[ContamRecord], averages_strata: bool = True) -> DetectorSignal:
    items = versions_by_item(records, _complete)
    return order_signal(
        CIRCULAR,
        items,
        reference=_in_order,
        changed=_every_rotation_right,
        n_excluded=sum(UNROTATED in versions for versions in items.values()),
        averages_strata=averages_strata,
    )


def against_reference(
    records: Iterable[ContamRecord], reference_records: Iterable[ContamRecord], reference: str
) -> DetectorSignal:
    """The model's CircularEval drop beyond a clean reference model's on the same items: any reader that is not
    perfect loses items under rotation, so the drop against zero accuses clean models too. Per item, whether
    rotation loses it (right in order, not in every rotation); exact McNemar on the pairs, plain averages.
    `reference` and `score` are the two models' drops (circular minus vanilla accuracy)."""

    def kept(versions: Versions) -> int:
        return int(not _in_order(versions).correct or _every_rotation_right(versions))

    ours, theirs = versions_by_item(records, _complete), versions_by_item(reference_records, _complete)
    shared = shared_items(CIRCULAR, ours, theirs, reference)
    comparison = stats.compare_paired(shared, [kept(theirs[i]) for i in shared], [kept(ours[i]) for i in shared])
    return DetectorSignal(
        detector=CIRCULAR,
        n_items=comparison.n_pairs,
        reference=comparison.acc_original - 1.0,
        score=comparison.acc_perturbed - 1.0,
        p_value=comparison.mcnemar_p,
        n_changed=sum(not kept(ours[i]) for i in shared),
        n_excluded=sum(UNROTATED in ours[i] for i in shared),
        baseline=reference,
    )


DETECTOR = Detector(
    name=CIRCULAR,
    label="CircularEval",
    description="accuracy when every rotation of the options must be right, minus accuracy in the original order",
    about="CircularEval on the original version of every kept {label} item: one document per rotation of its "
    "options; an item counts only if every rotation is answered right.",
    metrics=(
        ("acc_vanilla", True),
        ("acc_circular", True),
        ("circular_drop", True),
        ("circular_p", False),
        ("n_items", True),
        ("n_inconsistent", False),
        ("n_excluded", False),
    ),
    orders=rotation_orders,
    owns=owns,
    signal=circular_signal,
    leaves_out_items=True,
    baseline=Baseline(
        option="--circular-reference",
        signal=against_reference,
    ),
)
