"""ScienceQA-IMG: its spec, and its image rows (the hint a field of its own) as Items."""

from __future__ import annotations

from lmms_contam.items import Item, Skipped
from lmms_contam.letters import option_letters
from lmms_contam.registry.base import COLUMNS, BenchmarkColumns, BenchmarkSpec, Parser, Source, column_or_position


def parse_scienceqa(row: dict, original_id: str) -> Item | Skipped:
    """The question without its context: the hint stays a field of its own, as the built-in prompt shows it
    ("Context: <hint>" on a line above the question)."""
    if row["image"] is None:
        return Skipped("scienceqa", original_id, "no image")
    options = tuple(str(choice) for choice in row["choices"])
    answer = option_letters(len(options))[int(row["answer"])]
    return Item(
        benchmark="scienceqa",
        original_id=original_id,
        question=row["question"],
        options=options,
        answer=answer,
        image=row["image"],
        extra={"hint": row["hint"] or ""},
    )


SPEC = BenchmarkSpec(
    name="scienceqa",
    label="ScienceQA-IMG",
    source=Source("lmms-lab-encoder/ScienceQA", "ScienceQA-IMG", "test"),
    parser=Parser(column_or_position("index"), parse_scienceqa),
    columns=BenchmarkColumns(extra=("hint",), answer_style="letter"),
    option_layout=COLUMNS,
)
