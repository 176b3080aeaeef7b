"""VLMEvalKit's own CircularEval of a benchmark (MMBench) read as the report's circular detector.

VLMEvalKit asks each item once per rotation of its options (the copies of item i are numbered i + k * 1e6)
and writes one row per item whose `hit` is 1 when every rotation was answered right. The detector compares
that with the item's hit in the original order, which VLMEvalKit writes only when it evaluates with
PRINT_VANILLA=1 (`..._<judge>_vanilla_circ0_result`); its prediction file tells which items were asked once
(VLMEvalKit leaves out of the rotations an item whose options name option letters).
"""

from __future__ import annotations

import string
from collections import Counter

from loguru import logger

from lmms_contam.detectors.circular import ALL_ROTATIONS, UNROTATED
from lmms_contam.hosts.vlmevalkit.result_files import (
    VANILLA_CIRC0,
    ResultFile,
    cell_text,
    checked_own_table,
    read_table,
)
from lmms_contam.registry.benchmarks.mmbench import copied_item
from lmms_contam.report.inputs import ReportInputError, ScoredItem


def _item(index: object, path: object) -> str:
    """The item a CircularEval row asks (its copies are numbered i + k * 1e6); a non-integer index is refused
    naming the file."""
    try:
        number = float(cell_text(index))
    except ValueError:
        number = float("nan")
    if not number.is_integer():
        raise ReportInputError(f"{path}: index {cell_text(index)!r} is not an item number, as VLMEvalKit writes them")
    return copied_item(str(int(number)))


def circular_records(result: ResultFile) -> list[ScoredItem] | None:
    """Per item, its hit in the original order and under every rotation (or its one hit, when it was asked
    once); None, said, when the run was evaluated without PRINT_VANILLA=1."""
    judged = result.path.name.removesuffix(result.path.suffix).removesuffix("_result")
    circ0_path = result.path.with_name(f"{judged}{VANILLA_CIRC0}_result{result.path.suffix}")
    if not circ0_path.is_file():
        logger.warning(
            f"lmms-contam: {result.path} is VLMEvalKit's CircularEval of {result.dataset}, but without "
            f"{circ0_path.name} beside it the circular detector lacks each item's hit in the original "
            f"order; VLMEvalKit writes it when evaluating with PRINT_VANILLA=1 (PRINT_VANILLA=1 python -m "
            f"vlmeval --data {result.dataset} --model {result.model} --mode eval --reuse)"
        )
        return None
    circ0 = read_table(circ0_path)
    checked_own_table(circ0_path, circ0)
    first = {_item(row["index"], circ0_path): int(cell_text(row["hit"])) for row in circ0.to_dict("records")}
    every = {_item(row["index"], result.path): row for row in result.table.to_dict("records")}
    if set(first) != set(every):
        raise ReportInputError(f"{circ0_path} and {result.path}: not the same items ({len(first)} and {len(every)})")
    asked = _times_asked(result)
    records = []
    for item_id, row in every.items():
        common = {
            "benchmark": result.benchmark,
            "item_id": item_id,
            "original_id": item_id,
            "n_options": sum(bool(cell_text(row.get(letter))) for letter in string.ascii_uppercase),
            "gold": cell_text(row["answer"]),
            "response": cell_text(row["prediction"]),
        }
        if asked[item_id] == 1:
            records.append(ScoredItem(variant=UNROTATED, correct=int(cell_text(row["hit"])), **common))
        else:
            records.append(ScoredItem(variant="rotation0", correct=first[item_id], **common))
            records.append(ScoredItem(variant=ALL_ROTATIONS, correct=int(cell_text(row["hit"])), **common))
    return records


def _times_asked(result: ResultFile) -> Counter:
    """How many rows of the run's prediction file ask each item."""
    stem = f"{result.model}_{result.dataset}"
    found = [p for p in (result.path.with_name(f"{stem}.{form}") for form in ("xlsx", "tsv", "json")) if p.is_file()]
    if not found:
        raise ReportInputError(f"{result.path}: VLMEvalKit's prediction file {stem}.xlsx|tsv|json is not beside it")
    asked = Counter(_item(index, found[0]) for index in read_table(found[0])["index"])
    missing = [item for item in (_item(index, result.path) for index in result.table["index"]) if not asked[item]]
    if missing:
        raise ReportInputError(f"{found[0]}: no rows of item {missing[0]}, which {result.path.name} scored")
    return asked
