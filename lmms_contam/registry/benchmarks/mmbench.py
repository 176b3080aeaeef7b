"""MMBench: its spec, and its rows (options as fields, circular copies of an item left out) as Items."""

from __future__ import annotations

from typing import Any

from lmms_contam.items import Item, Skipped
from lmms_contam.registry.base import COLUMNS, LETTERS_BY_CATEGORY, BenchmarkSpec, Parser, Source, column

MMBENCH_COPY_OFFSET = 1_000_000  # MMBench numbers the circular copies of item i as i + k * 1e6


def _present(value: Any) -> bool:
    """MMBench leaves unused option columns empty, None or the string 'nan' (pandas' export)."""
    return value is not None and str(value).strip() not in ("", "nan") and value == value


def parse_mmbench(row: dict, original_id: str) -> Item | Skipped:
    index = int(row["index"])
    if index >= MMBENCH_COPY_OFFSET:
        return Skipped("mmbench", original_id, f"circular copy of item {index % MMBENCH_COPY_OFFSET} (same image)")
    options = tuple(str(row[letter]) for letter in "ABCDE" if _present(row.get(letter)))
    question = f"{row['hint']} {row['question']}" if _present(row.get("hint")) else row["question"]
    return Item(
        benchmark="mmbench",
        original_id=original_id,
        question=question,
        options=options,
        answer=row["answer"].strip(),
        image=row["image"],
        extra={"category": row["category"], "l2_category": row["L2-category"]},
    )


def copied_item(original_id: str) -> str:
    """The item a circular copy's row shows the image of (its own id for an item that is no copy)."""
    return str(int(original_id) % MMBENCH_COPY_OFFSET)


SPEC = BenchmarkSpec(
    name="mmbench",
    label="MMBench",
    source=Source("lmms-lab-encoder/MMBench", "en", "dev"),
    parser=Parser(column("index"), parse_mmbench, copied_item),
    columns=LETTERS_BY_CATEGORY,
    option_layout=COLUMNS,
)
