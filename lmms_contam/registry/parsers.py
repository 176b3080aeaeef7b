"""Every benchmark's rows as Items: one parser per benchmark, from a row of its lmms-eval dataset.

The same parser gives the scan its images, the judge its questions, the `*_scanned` tasks the ids they join
flags on, and `perturb` its items. The registry (specs.py) names which parser each benchmark uses.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lmms_contam.items import Item, Skipped
from lmms_contam.letters import option_letters

if TYPE_CHECKING:
    import datasets

MMSTAR_OPTIONS = re.compile(r"\nOptions: A: (?P<body>.*)$", re.S)
LETTER_LINE = re.compile(r"^([A-Z])\.\s+(.*)$")
MMBENCH_COPY_OFFSET = 1_000_000  # MMBench numbers the circular copies of item i as i + k * 1e6
NATURALBENCH_SLOTS = ("q0_i0", "q0_i1", "q1_i0", "q1_i1")  # question x image of a group, by Index % 4
MME_SLOTS = ("q0", "q1")  # the two questions about one image, in row order


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


def realworldqa_options(question: str) -> list[str] | None:
    """RealWorldQA's multiple-choice questions list 'A. x' lines; open-ended ones have none."""
    options = []
    for line in question.splitlines():
        match = LETTER_LINE.match(line.strip())
        if match and match[1] == option_letters(len(options) + 1)[-1]:
            options.append(match[2].strip())
    return options or None


def _present(value: Any) -> bool:
    """MMBench leaves unused option columns empty, None or the string 'nan' (pandas' export)."""
    return value is not None and str(value).strip() not in ("", "nan") and value == value


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


def naturalbench_group(row: dict, _original_id: str) -> tuple[str, str]:
    """NaturalBench's groups: 2 questions x 2 images, by Index // 4; the slot by Index % 4."""
    return str(int(row["Index"]) // 4), NATURALBENCH_SLOTS[int(row["Index"]) % 4]


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


def occurrence_ids(values: list[Any]) -> list[str]:
    """MME asks two questions per image under one question_id: '<id>#0', '<id>#1' in row order."""
    seen: Counter = Counter()
    ids = []
    for value in values:
        ids.append(f"{value}#{seen[value]}")
        seen[value] += 1
    return ids


@dataclass(frozen=True)
class Parser:
    ids: Callable[[datasets.Dataset], list[str]]  # every row's original id, from id columns only
    parse: Callable[[dict, str], Item | Skipped]
    scanned_as: Callable[[str], str] = lambda original_id: original_id  # the item whose image a row shows


def column(name: str) -> Callable[[datasets.Dataset], list[str]]:
    return lambda rows: [str(value) for value in rows[name]]


def column_or_position(name: str) -> Callable[[datasets.Dataset], list[str]]:
    return lambda rows: column(name)(rows) if name in rows.column_names else [str(i) for i in range(len(rows))]
