"""Images of flagged items, from the same perturbed set the tasks resolved."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

from PIL import Image

from lmms_contam.harness.datasets import load_perturbed_set
from lmms_contam.schema import PerturbedSetError

THUMBNAIL = 256
SMALLEST = 96  # tiny images (the synthetic benchmark's 32x32 scenes) are enlarged, pixels kept sharp


@dataclass(frozen=True)
class ItemEvidence:
    question: str
    options: list[str]
    original_image: str  # data: URI
    perturbed_image: str


def data_uri(image: Image.Image, size: int = THUMBNAIL) -> str:
    copy = image.convert("RGB")
    if max(copy.size) < SMALLEST:
        scale = -(-SMALLEST // max(copy.size))
        copy = copy.resize((copy.width * scale, copy.height * scale), Image.Resampling.NEAREST)
    copy.thumbnail((size, size))
    buffer = io.BytesIO()
    copy.save(buffer, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def collect(benchmark: str, item_ids: set[str]) -> tuple[dict[str, ItemEvidence], str]:
    """Evidence for the items found, and a note saying why some or all are missing."""
    if not item_ids:
        return {}, ""
    try:
        rows = load_perturbed_set(benchmark)
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
            original_image=data_uri(row["original_image"]),
            perturbed_image=data_uri(row["image"]),
        )
    missing = len(item_ids) - len(evidence)
    return evidence, (f"{missing} flagged item(s) are not in the resolved set" if missing else "")
