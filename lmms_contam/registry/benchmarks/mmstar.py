"""MMStar: its spec, and its rows, whose questions list their options inline, as Items."""

from __future__ import annotations

import re

from lmms_contam.items import Item, Skipped
from lmms_contam.letters import option_letters
from lmms_contam.registry.base import INLINE, LETTERS_BY_CATEGORY, BenchmarkSpec, Parser, Source, column

MMSTAR_OPTIONS = re.compile(r"\nOptions: A: (?P<body>.*)$", re.S)


def mmstar_options(question: str) -> list[str] | None:
    """MMStar writes its options inside the question: '...\\nOptions: A: x, B: y, C: z, D: w'."""
    match = MMSTAR_OPTIONS.search(question)
    if not match:
        return None
    body, options = match["body"], []
    for letter in option_letters(26)[1:]:
        marker = f", {letter}: "
        if marker not in body:
            break
        head, body = body.split(marker, 1)
        options.append(head)
    return [*options, body]


def parse_mmstar(row: dict, original_id: str) -> Item | Skipped:
    options = mmstar_options(row["question"])
    if options is None:
        return Skipped("mmstar", original_id, "options not found in the question")
    return Item(
        benchmark="mmstar",
        original_id=original_id,
        question=row["question"],
        options=tuple(options),
        answer=row["answer"].strip(),
        image=row["image"],
        extra={"category": row["category"], "l2_category": row["l2_category"]},
    )


SPEC = BenchmarkSpec(
    name="mmstar",
    label="MMStar",
    source=Source("Lin-Chen/MMStar", None, "val"),
    parser=Parser(column("index"), parse_mmstar),
    columns=LETTERS_BY_CATEGORY,
    option_layout=INLINE,
    stratified=True,
    released=True,
)
