"""MM-Detect's option-order sensitivity: the same item with its options shuffled (seeded by its id) so the
gold moves. Variants: `original_order` and `shuffled`."""

from __future__ import annotations

from collections.abc import Iterable

from lmms_contam.detectors.base import AskedItem, Detector, Order
from lmms_contam.detectors.options import gold_moving_shuffle
from lmms_contam.detectors.signals import DetectorSignal, order_signal, versions_by_item
from lmms_contam.records import ContamRecord

OPTION_SHUFFLE = "option_shuffle"
VARIANTS = ("original_order", "shuffled")


def shuffled_orders(item: AskedItem) -> dict[str, Order | None]:
    n = len(item.options)
    return {"original_order": tuple(range(n)), "shuffled": gold_moving_shuffle(item.item_id, n, item.gold)}


def shuffle_signal(records: Iterable[ContamRecord], averages_strata: bool = True) -> DetectorSignal:
    items = versions_by_item(records, lambda versions: set(versions) == set(VARIANTS))
    return order_signal(
        OPTION_SHUFFLE,
        items,
        reference=lambda versions: versions["original_order"],
        changed=lambda versions: versions["shuffled"].correct,
        averages_strata=averages_strata,
    )


DETECTOR = Detector(
    name=OPTION_SHUFFLE,
    label="option shuffle",
    description="accuracy with options shuffled so the gold moves, minus accuracy in the original order",
    about="MM-Detect's option-order sensitivity on the kept {label} items: each item in its original order and "
    "with its options shuffled (seeded by item id) so that the gold letter moves.",
    metrics=(
        ("acc_original", True),
        ("acc_shuffled", True),
        ("shuffle_delta", True),
        ("shuffle_p", False),
        ("n_items", True),
        ("n_flipped", False),
    ),
    orders=shuffled_orders,
    owns=lambda variant: variant in VARIANTS,
    signal=shuffle_signal,
)
