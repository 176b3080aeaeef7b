"""MMMU: its spec, and its multiple-choice rows about one image as Items."""

from __future__ import annotations

import ast
import re

from lmms_contam.items import Item, Skipped
from lmms_contam.registry.base import COLUMNS, LETTERS, BenchmarkSpec, Parser, Source, column

MMMU_IMAGE_TOKEN = re.compile(r"<image \d+>")


def parse_mmmu(row: dict, original_id: str) -> Item | Skipped:
    """MMMU's multiple-choice questions about one image; open questions have no options to swap to, and a
    question about several images has no one image to edit: both are skipped, counted."""
    if row["question_type"] != "multiple-choice":
        return Skipped("mmmu", original_id, f"{row['question_type']} question, no options to swap to")
    images = set(MMMU_IMAGE_TOKEN.findall(row["question"] + row["options"]))
    if images != {"<image 1>"}:
        return Skipped("mmmu", original_id, f"shows {len(images)} images, not one")
    options = tuple(str(option) for option in ast.literal_eval(row["options"]))
    return Item(
        benchmark="mmmu",
        original_id=original_id,
        question=row["question"],
        options=options,
        answer=row["answer"].strip(),
        image=row["image_1"],
    )


SPEC = BenchmarkSpec(
    name="mmmu",
    label="MMMU",
    source=Source("lmms-lab-encoder/MMMU", None, "validation"),
    parser=Parser(column("id"), parse_mmmu),
    columns=LETTERS,
    option_layout=COLUMNS,
)
