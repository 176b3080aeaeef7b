"""MME: its spec, its rows as Items, and its pairs of yes/no questions about one image."""

from __future__ import annotations

from collections import Counter
from typing import Any

from lmms_contam.items import Item
from lmms_contam.registry.base import BenchmarkColumns, BenchmarkSpec, Parser, Source

MME_SLOTS = ("q0", "q1")  # the two questions about one image, in row order


def occurrence_ids(values: list[Any]) -> list[str]:
    """MME asks two questions per image under one question_id: '<id>#0', '<id>#1' in row order."""
    seen: Counter = Counter()
    ids = []
    for value in values:
        ids.append(f"{value}#{seen[value]}")
        seen[value] += 1
    return ids


def mme_group(_row: dict, original_id: str) -> tuple[str, str]:
    """MME's pairs: the two questions about one image share its question_id; '<id>#k' is the k-th (q0, q1)."""
    question_id, occurrence = original_id.rsplit("#", 1)
    return question_id, f"q{occurrence}"


def parse_mme(row: dict, original_id: str) -> Item:
    group_id, slot = mme_group(row, original_id)
    return Item(
        benchmark="mme",
        original_id=original_id,
        question=row["question"],
        options=("Yes", "No"),
        answer=row["answer"].strip().rstrip("."),
        image=row["image"],
        extra={"category": row["category"], "group_id": group_id, "group_slot": slot},
    )


SPEC = BenchmarkSpec(
    name="mme",
    label="MME",
    source=Source("lmms-lab-encoder/MME", None, "test"),
    parser=Parser(lambda rows: occurrence_ids(rows["question_id"]), parse_mme),
    columns=BenchmarkColumns(extra=("category", "group_id", "group_slot"), answer_style="text"),
    group_scheme="mme",
    group_of=mme_group,
    group_slots=MME_SLOTS,
)
