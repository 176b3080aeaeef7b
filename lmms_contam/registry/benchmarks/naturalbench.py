"""NaturalBench: its spec, its rows as Items, and its groups of 2 questions x 2 images."""

from __future__ import annotations

from lmms_contam.items import Item
from lmms_contam.registry.base import BenchmarkColumns, BenchmarkSpec, Parser, Source, column

NATURALBENCH_SLOTS = ("q0_i0", "q0_i1", "q1_i0", "q1_i1")  # question x image of a group, by Index % 4


def naturalbench_group(row: dict, _original_id: str) -> tuple[str, str]:
    """NaturalBench's groups: 2 questions x 2 images, by Index // 4; the slot by Index % 4."""
    return str(int(row["Index"]) // 4), NATURALBENCH_SLOTS[int(row["Index"]) % 4]


def parse_naturalbench(row: dict, original_id: str) -> Item:
    yes_no = row["Question_Type"] == "yes_no"
    group_id, slot = naturalbench_group(row, original_id)
    return Item(
        benchmark="naturalbench",
        original_id=original_id,
        question=row["Question"],
        options=("Yes", "No") if yes_no else ("A", "B"),
        answer=row["Answer"].strip(),
        image=row["Image"],
        extra={"question_type": row["Question_Type"], "group_id": group_id, "group_slot": slot},
    )


SPEC = BenchmarkSpec(
    name="naturalbench",
    label="NaturalBench",
    source=Source("BaiqiL/NaturalBench-lmms-eval", None, "test"),
    parser=Parser(column("Index"), parse_naturalbench),
    columns=BenchmarkColumns(extra=("question_type", "group_id", "group_slot"), answer_style="text"),
    group_scheme="naturalbench",
    group_of=naturalbench_group,
    group_slots=NATURALBENCH_SLOTS,
)
