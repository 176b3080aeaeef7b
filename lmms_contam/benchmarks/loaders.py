"""The benchmarks as lmms-eval loads them (same hub ids, splits and fields), or a local copy of them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import datasets

from lmms_contam.items import Item, Skipped
from lmms_contam.schema import NATURALBENCH_SLOTS, option_letters

HUB = {
    "mmstar": ("Lin-Chen/MMStar", "val"),
    "realworldqa": ("lmms-lab-encoder/RealWorldQA", "test"),
    "naturalbench": ("BaiqiL/NaturalBench-lmms-eval", "test"),
}
MMSTAR_OPTIONS = re.compile(r"\nOptions: A: (?P<body>.*)$", re.S)
LETTER_LINE = re.compile(r"^([A-Z])\.\s+(.*)$")


def load_rows(benchmark: str, source: str | None = None) -> datasets.Dataset:
    """The benchmark's rows from its hub id, or from a local parquet file/folder or save_to_disk folder."""
    hub_id, split = HUB[benchmark]
    if source is None:
        return datasets.load_dataset(hub_id, split=split)
    path = Path(source)
    if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
        loaded = datasets.load_from_disk(str(path))
        return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
    if path.is_dir():
        files = sorted(str(p) for p in path.rglob("*.parquet"))
        return datasets.load_dataset("parquet", data_files={split: files}, split=split)
    if path.is_file():
        return datasets.load_dataset("parquet", data_files={split: str(path)}, split=split)
    return datasets.load_dataset(source, split=split)


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


def items(benchmark: str, rows: datasets.Dataset) -> Iterator[Item | Skipped]:
    """Every row as an Item, or as a Skipped with the reason it cannot take part."""
    for index, row in enumerate(rows):
        if benchmark == "mmstar":
            options = mmstar_options(row["question"])
            original_id = str(row["index"])
            if options is None:
                yield Skipped(benchmark, original_id, "options not found in the question")
                continue
            yield Item(benchmark, original_id, row["question"], tuple(options), row["answer"].strip(), row["image"],
                       {"category": row["category"], "l2_category": row["l2_category"]})  # fmt: skip
        elif benchmark == "realworldqa":
            original_id = str(row.get("index", index))
            options = realworldqa_options(row["question"]) or []
            answer = row["answer"].strip()
            if options and answer not in option_letters(len(options)):
                yield Skipped(benchmark, original_id, f"answer {answer!r} is not one of its option letters")
                continue
            # Open-ended items (no lettered options) keep options=() and their text answer.
            yield Item(benchmark, original_id, row["question"], tuple(options), answer, row["image"])
        else:
            original_id = str(row["Index"])
            yes_no = row["Question_Type"] == "yes_no"
            yield Item(
                benchmark, original_id, row["Question"], ("Yes", "No") if yes_no else ("A", "B"),
                row["Answer"].strip(), row["Image"],
                {"question_type": row["Question_Type"], "group_id": str(int(row["Index"]) // 4),
                 "group_slot": NATURALBENCH_SLOTS[int(row["Index"]) % 4]},
            )  # fmt: skip
