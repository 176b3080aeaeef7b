"""Images of flagged items, from the same perturbed set the tasks resolved."""

from __future__ import annotations

from dataclasses import dataclass

from lmms_contam.imaging import evidence_uri
from lmms_contam.schema import PerturbedSetError
from lmms_contam.set_locations import load_perturbed_set


@dataclass(frozen=True)
class ItemEvidence:
    question: str
    options: list[str]
    original_image: str  # data: URI
    perturbed_image: str


def collect(benchmark: str, item_ids: set[str]) -> tuple[dict[str, ItemEvidence], str]:
    """Evidence for the items found, and a note saying why some or all are missing. A report never downloads:
    a set that is not on this machine is named, with where it would come from."""
    if not item_ids:
        return {}, ""
    try:
        rows = load_perturbed_set(benchmark, fetch=False)
    except (PerturbedSetError, OSError) as exc:
        first_line = str(exc).splitlines()[0]
        return {}, f"images unavailable: {first_line}"
    positions = {item_id: index for index, item_id in enumerate(rows["item_id"]) if item_id in item_ids}
    evidence = {}
    for item_id, index in positions.items():
        row = rows[index]
        evidence[item_id] = ItemEvidence(
            question=row["question"],
            options=list(row["options"]),
            original_image=evidence_uri(row["original_image"]),
            perturbed_image=evidence_uri(row["image"]),
        )
    missing = len(item_ids) - len(evidence)
    return evidence, (f"{missing} flagged item(s) are not in the resolved set" if missing else "")
