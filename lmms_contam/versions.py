"""The versions of an item a task asks, whichever harness asks them: the original and its counterfactual, or a
peer detector's reorderings of the original's options and its question without the image.

A `Version` says which image is shown, in which order the options are shown, and the gold letter that
follows; each host turns it into what its harness reads (an lmms-eval document, a VLMEvalKit TSV row), so
both hosts ask the same questions of the same items.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.options import gold_letter
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.letters import option_letters
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED
from lmms_contam.schema import PerturbedSetError

ORIGINAL_IMAGE, PERTURBED_IMAGE, NO_IMAGE = "original_image", "image", None  # a set row's image columns


def families() -> tuple[str, ...]:
    """Every task family: the perturbation's and one per registered detector."""
    return (CONTAM, ORIGINAL, PERTURBED, *DETECTORS)


@dataclass(frozen=True)
class Version:
    variant: str  # original | perturbed, or a detector's version (rotation<r>, unrotated, shuffled, ...)
    gold: str
    image: str | None  # the set row's column holding the image shown; None: the image is withheld
    order: tuple[int, ...] | None = None  # which of the row's options each position shows; None: as they are
    hidden: int | None = None  # the option shown masked, whose text is the gold (masked-option guessing)


def item_versions(benchmark: str, family: str, row: dict, rotate_all: bool = False) -> list[Version]:
    """The versions of one set row that a task of `family` asks (a detector's: of its original version).
    `rotate_all`: CircularEval rotates items whose options name option letters too (VLMEvalKit leaves them
    out and asks them once)."""
    if family == CONTAM:
        return [_original(row), _perturbed(row)]
    if family == ORIGINAL:
        return [_original(row)]
    if family == PERTURBED:
        return [_perturbed(row)]
    if family not in DETECTORS:
        raise ValueError(f"unknown task family {family!r}; known: {', '.join(families())}")
    detector = DETECTORS[family]
    options = tuple(row["options"])
    letters = option_letters(len(options))
    if row["original_answer"] not in letters:
        raise PerturbedSetError(
            f"{benchmark} item {row['item_id']}: answer {row['original_answer']!r} is not one of its option "
            f"letters {letters}; the peer detectors need lettered options"
        )
    item = AskedItem(
        item_id=row["item_id"], options=options, gold=letters.index(row["original_answer"]), rotate_all=rotate_all
    )
    image = NO_IMAGE if detector.withholds_image else ORIGINAL_IMAGE
    if detector.hides:
        hidden = detector.hides(item)
        return [Version(variant, options[hidden], image, hidden=hidden) for variant in detector.orders(item)]
    return [
        Version(
            variant=variant,
            gold=row["original_answer"] if order is None else gold_letter(order, item.gold),
            image=image,
            order=order,
        )
        for variant, order in detector.orders(item).items()
    ]


def _original(row: dict) -> Version:
    return Version(ORIGINAL, row["original_answer"], ORIGINAL_IMAGE)


def _perturbed(row: dict) -> Version:
    return Version(PERTURBED, row["new_answer"], PERTURBED_IMAGE)
