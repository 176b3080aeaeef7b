"""SEED-Bench: its spec, and its image rows (options as fields, the image a one-frame list) as Items."""

from __future__ import annotations

from lmms_contam.items import Item, Skipped
from lmms_contam.registry.base import COLUMNS, BenchmarkColumns, BenchmarkSpec, Parser, Source, column


def parse_seedbench(row: dict, original_id: str) -> Item | Skipped:
    if row["data_type"] != "image" or len(row["image"]) != 1:
        frames = len(row["image"])
        return Skipped("seedbench", original_id, f"{row['data_type']} item with {frames} frames, not one image")
    options = tuple(row[f"choice_{letter}"] for letter in "abcd")
    return Item(
        benchmark="seedbench",
        original_id=original_id,
        question=row["question"],
        options=options,
        answer=row["answer"].strip(),
        image=row["image"][0],
        extra={"question_type_id": str(row.get("question_type_id", ""))},
    )


SPEC = BenchmarkSpec(
    name="seedbench",
    label="SEED-Bench",
    source=Source("lmms-lab-encoder/SEED-Bench", None, "test"),
    parser=Parser(column("question_id"), parse_seedbench),
    columns=BenchmarkColumns(extra=("question_type_id",), answer_style="letter"),
    option_layout=COLUMNS,
)
