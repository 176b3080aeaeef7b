"""RealWorldQA: its spec, and its rows, whose questions list their options one line each, as Items."""

from __future__ import annotations

import re

from lmms_contam.items import Item, Skipped
from lmms_contam.letters import option_letters
from lmms_contam.registry.base import LETTERS, LINES, BenchmarkSpec, Parser, Source, column_or_position

LETTER_LINE = re.compile(r"^([A-Z])\.\s+(.*)$")


def realworldqa_options(question: str) -> list[str] | None:
    """RealWorldQA's multiple-choice questions list 'A. x' lines; open-ended ones have none."""
    options = []
    for line in question.splitlines():
        match = LETTER_LINE.match(line.strip())
        if match and match[1] == option_letters(len(options) + 1)[-1]:
            options.append(match[2].strip())
    return options or None


def parse_realworldqa(row: dict, original_id: str) -> Item | Skipped:
    options = realworldqa_options(row["question"]) or []
    answer = row["answer"].strip()
    if options and answer not in option_letters(len(options)):
        return Skipped("realworldqa", original_id, f"answer {answer!r} is not one of its option letters")
    # Open-ended items (no lettered options) keep options=() and their text answer.
    return Item(
        benchmark="realworldqa",
        original_id=original_id,
        question=row["question"],
        options=tuple(options),
        answer=answer,
        image=row["image"],
    )


SPEC = BenchmarkSpec(
    name="realworldqa",
    label="RealWorldQA",
    source=Source("lmms-lab-encoder/RealWorldQA", None, "test"),
    parser=Parser(column_or_position("index"), parse_realworldqa),
    columns=LETTERS,
    option_layout=LINES,
    released=True,
)
