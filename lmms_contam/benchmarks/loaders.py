"""The benchmarks as lmms-eval loads them (same hub ids, configs, splits and fields), or a local copy.

Every benchmark has one parser from a row to an Item (or a counted Skipped). The same parser gives
the scan its images, the judge its questions and the `*_scanned` tasks the ids they join flags on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa

from lmms_contam.benchmarks import SCANNABLE
from lmms_contam.items import Item, Skipped
from lmms_contam.schema import NATURALBENCH_SLOTS, option_letters

MMSTAR_OPTIONS = re.compile(r"\nOptions: A: (?P<body>.*)$", re.S)
LETTER_LINE = re.compile(r"^([A-Z])\.\s+(.*)$")
MMBENCH_COPY_OFFSET = 1_000_000  # MMBench numbers the circular copies of item i as i + k * 1e6


@dataclass(frozen=True)
class Source:
    hub_id: str
    config: str | None
    split: str


HUB = {
    "mmstar": Source("Lin-Chen/MMStar", None, "val"),
    "realworldqa": Source("lmms-lab-encoder/RealWorldQA", None, "test"),
    "naturalbench": Source("BaiqiL/NaturalBench-lmms-eval", None, "test"),
    "seedbench": Source("lmms-lab-encoder/SEED-Bench", None, "test"),
    "mmbench": Source("lmms-lab-encoder/MMBench", "en", "dev"),
    "mme": Source("lmms-lab-encoder/MME", None, "test"),
}


def read_rows(source: str, split: str) -> datasets.Dataset:
    """A split of a local save_to_disk folder, a parquet file or folder of them, or a hub dataset id; a
    local copy that cannot be read is refused with its name."""
    path = Path(source)
    if not path.exists():
        return datasets.load_dataset(source, split=split)
    try:
        return _read_local(path, split)
    except (pa.ArrowException, datasets.exceptions.DatasetGenerationError, OSError, KeyError) as exc:
        raise ValueError(f"{source}: not a readable dataset copy ({type(exc).__name__}: {exc})") from exc


def _read_local(path: Path, split: str) -> datasets.Dataset:
    if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
        loaded = datasets.load_from_disk(str(path))
        return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
    if path.is_dir():
        files = sorted(str(p) for p in path.rglob("*.parquet"))
        return datasets.load_dataset("parquet", data_files={split: files}, split=split)
    return datasets.load_dataset("parquet", data_files={split: str(path)}, split=split)


def load_rows(benchmark: str, source: str | None = None) -> datasets.Dataset:
    """The benchmark's rows from its hub id (and config), or from a local copy or another hub id."""
    hub = HUB[benchmark]
    if source is None:
        return datasets.load_dataset(hub.hub_id, hub.config, split=hub.split)
    return read_rows(source, hub.split)


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


def _mmstar(row: dict, original_id: str) -> Item | Skipped:
    options = mmstar_options(row["question"])
    if options is None:
        return Skipped("mmstar", original_id, "options not found in the question")
    return Item("mmstar", original_id, row["question"], tuple(options), row["answer"].strip(), row["image"],
                {"category": row["category"], "l2_category": row["l2_category"]})  # fmt: skip


def _realworldqa(row: dict, original_id: str) -> Item | Skipped:
    options = realworldqa_options(row["question"]) or []
    answer = row["answer"].strip()
    if options and answer not in option_letters(len(options)):
        return Skipped("realworldqa", original_id, f"answer {answer!r} is not one of its option letters")
    # Open-ended items (no lettered options) keep options=() and their text answer.
    return Item("realworldqa", original_id, row["question"], tuple(options), answer, row["image"])


def _naturalbench(row: dict, original_id: str) -> Item:
    yes_no = row["Question_Type"] == "yes_no"
    return Item(
        "naturalbench", original_id, row["Question"], ("Yes", "No") if yes_no else ("A", "B"),
        row["Answer"].strip(), row["Image"],
        {"question_type": row["Question_Type"], "group_id": str(int(row["Index"]) // 4),
         "group_slot": NATURALBENCH_SLOTS[int(row["Index"]) % 4]},
    )  # fmt: skip


def _seedbench(row: dict, original_id: str) -> Item | Skipped:
    if row["data_type"] != "image" or len(row["image"]) != 1:
        frames = len(row["image"])
        return Skipped("seedbench", original_id, f"{row['data_type']} item with {frames} frames, not one image")
    options = tuple(row[f"choice_{letter}"] for letter in "abcd")
    return Item("seedbench", original_id, row["question"], options, row["answer"].strip(), row["image"][0],
                {"question_type_id": str(row.get("question_type_id", ""))})  # fmt: skip


def _mmbench(row: dict, original_id: str) -> Item | Skipped:
    index = int(row["index"])
    if index >= MMBENCH_COPY_OFFSET:
        return Skipped("mmbench", original_id, f"circular copy of item {index % MMBENCH_COPY_OFFSET} (same image)")
    options = tuple(str(row[letter]) for letter in "ABCDE" if _present(row.get(letter)))
    question = f"{row['hint']} {row['question']}" if _present(row.get("hint")) else row["question"]
    return Item("mmbench", original_id, question, options, row["answer"].strip(), row["image"],
                {"category": row["category"], "l2_category": row["L2-category"]})  # fmt: skip


def _mme(row: dict, original_id: str) -> Item:
    return Item("mme", original_id, row["question"], ("Yes", "No"), row["answer"].strip().rstrip("."), row["image"],
                {"category": row["category"]})  # fmt: skip


def _occurrence_ids(values: list[Any]) -> list[str]:
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


def _column(name: str) -> Callable[[datasets.Dataset], list[str]]:
    return lambda rows: [str(value) for value in rows[name]]


def _column_or_position(name: str) -> Callable[[datasets.Dataset], list[str]]:
    return lambda rows: _column(name)(rows) if name in rows.column_names else [str(i) for i in range(len(rows))]


PARSERS = {
    "mmstar": Parser(_column("index"), _mmstar),
    "realworldqa": Parser(_column_or_position("index"), _realworldqa),
    "naturalbench": Parser(_column("Index"), _naturalbench),
    "seedbench": Parser(_column("question_id"), _seedbench),
    "mmbench": Parser(_column("index"), _mmbench, lambda i: str(int(i) % MMBENCH_COPY_OFFSET)),
    "mme": Parser(lambda rows: _occurrence_ids(rows["question_id"]), _mme),
}


assert tuple(HUB) == tuple(PARSERS) == SCANNABLE


def original_ids(benchmark: str, rows: datasets.Dataset) -> list[str]:
    """Every row's id, read from its id columns only (no image is decoded)."""
    return PARSERS[benchmark].ids(rows)


def items(benchmark: str, rows: datasets.Dataset) -> Iterator[Item | Skipped]:
    """Every row as an Item, or as a Skipped with the reason it cannot take part."""
    parser = PARSERS[benchmark]
    for original_id, row in zip(parser.ids(rows), rows, strict=True):
        yield parser.parse(row, original_id)


def items_of(benchmark: str, rows: datasets.Dataset, ids: set[str]) -> dict[str, Item]:
    """The Items with these ids, decoding only their rows' images."""
    wanted = [i for i, row_id in enumerate(original_ids(benchmark, rows)) if row_id in ids]
    return {item.original_id: item for item in items(benchmark, rows.select(wanted)) if isinstance(item, Item)}


def scanned_ids(benchmark: str, rows: datasets.Dataset) -> list[str]:
    """The ids of the items a scan embeds (those `items` yields as Items), without decoding any image."""
    parser = PARSERS[benchmark]
    undecoded = (row for batch in rows.with_format("arrow").iter(batch_size=256) for row in batch.to_pylist())
    return [i for i, row in zip(parser.ids(rows), undecoded, strict=True) if isinstance(parser.parse(row, i), Item)]
