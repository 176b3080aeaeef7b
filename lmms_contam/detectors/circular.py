"""CircularEval (MMBench): an item counts only if every rotation of its options is answered right.

Variants: `rotation<r>`; `unrotated` for an item it leaves out (options that name option letters), asked once
in its own order and counted by that answer, as VLMEvalKit counts it; `rotation0` and `all_rotations` where a
harness gives only its own per-item result (VLMEvalKit's CircularEval of MMBench).
"""

from __future__ import annotations

from collections.abc import Iterable

from lmms_contam.detectors.base import AskedItem, Detector, Order
from lmms_contam.detectors.options import names_option_letters, rotations
from lmms_contam.detectors.signals import DetectorSignal, Versions, order_signal, versions_by_item
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


def circular_signal(records: Iterable[ContamRecord], averages_strata: bool = True) -> DetectorSignal:
    def complete(versions: Versions) -> bool:
        n = next(iter(versions.values())).n_options
        return set(versions) in ({f"rotation{r}" for r in range(n)}, {UNROTATED}, {"rotation0", ALL_ROTATIONS})

    items = versions_by_item(records, complete)
    return order_signal(
        CIRCULAR,
        items,
        reference=lambda versions: versions.get("rotation0") or versions[UNROTATED],
        changed=lambda versions: int(all(r.correct for r in versions.values())),
        n_excluded=sum(UNROTATED in versions for versions in items.values()),
        averages_strata=averages_strata,
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
)
