"""AI2D: its spec, and its diagram rows (options a field, the answer an index into them) as Items."""

from __future__ import annotations

from lmms_contam.items import Item
from lmms_contam.letters import option_letters
from lmms_contam.registry.base import COLUMNS, LETTERS, BenchmarkSpec, Parser, Source, column_or_position


def parse_ai2d(row: dict, original_id: str) -> Item:
    options = tuple(str(option) for option in row["options"])
    answer = option_letters(len(options))[int(row["answer"])]
    return Item(
        benchmark="ai2d",
        original_id=original_id,
        question=row["question"],
        options=options,
        answer=answer,
        image=row["image"],
    )


SPEC = BenchmarkSpec(
    name="ai2d",
    label="AI2D",
    source=Source("lmms-lab-encoder/ai2d", None, "test"),
    parser=Parser(column_or_position("index"), parse_ai2d),
    columns=LETTERS,
    option_layout=COLUMNS,
)
