"""The toy benchmark's registry layer: what it is, and how a row of its hub dataset becomes an Item."""

from __future__ import annotations

from lmms_contam.items import Item
from lmms_contam.registry.base import COLUMNS, BenchmarkColumns, BenchmarkSpec, Parser, Source, column

NAME = "toyquiz"


def parse_toyquiz(row: dict, original_id: str) -> Item:
    return Item(
        benchmark=NAME,
        original_id=original_id,
        question=row["prompt"],
        options=tuple(row["choices"]),
        answer=row["correct"].strip(),
        image=row["picture"],
        extra={"topic": row["topic"]},
    )


SPEC = BenchmarkSpec(
    name=NAME,
    label="ToyQuiz",
    source=Source("lmms-contam-tests/ToyQuiz", None, "test"),
    parser=Parser(column("qid"), parse_toyquiz),
    columns=BenchmarkColumns(extra=("topic",), answer_style="letter"),
    option_layout=COLUMNS,
)
