"""Leaderboard mode, once for every host: each perturbed item's original version taken from a run of the host's
own task or dataset of the benchmark, the run everyone reports, and checked by content before it is used.

A host provides the built-in run's answers by original id (`BuiltinAnswer`) and how one of them differs from the
set's original of the item (`mismatch`: its own texts, its own gold); the pairing, its refusals and where the
originals came from are the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from lmms_contam.records import ORIGINAL, PERTURBED
from lmms_contam.report.inputs import ModelBenchmark, ReportInputError, ScoredItem


@dataclass(frozen=True)
class BuiltinAnswer:
    """The built-in run's record of one item."""

    correct: int
    gold: str  # the gold the built-in run scored against
    response: str
    where: str  # file and line or row, for the errors that name it


def pair_originals(
    entry: ModelBenchmark,
    run: str,
    answers: dict[str, BuiltinAnswer],
    mismatch: Callable[[str, ScoredItem, BuiltinAnswer], str],
) -> None:
    """Add each perturbed item's original from `answers` (keyed by original id), refusing an item the run lacks
    or one whose content is not the set's original (`mismatch(item id, perturbed record, answer)` says how).
    The run's other items are left out."""
    for item_id, versions in entry.items.items():
        perturbed = versions[PERTURBED]
        found = answers.get(perturbed.original_id)
        if found is None:
            raise ReportInputError(
                f"{run}: no item {perturbed.original_id} of {entry.benchmark}, which the perturbed run scored "
                f"({item_id}); pair runs of the same split"
            )
        what = mismatch(item_id, perturbed, found)
        if what:
            raise ReportInputError(
                f"{entry.model}, {entry.benchmark}: item {perturbed.original_id} is not the same item in "
                f"{found.where} and {entry.sources[PERTURBED]} ({what}): the built-in run is of another version "
                "of the benchmark; pair runs of the set's own version"
            )
        versions[ORIGINAL] = replace(
            perturbed, variant=ORIGINAL, correct=found.correct, gold=found.gold, response=found.response
        )
    entry.sources[ORIGINAL] = run


def paired_note(run_name: str, host_task: str, entry: ModelBenchmark, run_items: int) -> str:
    """What the report says of the originals' source."""
    return (
        f"leaderboard mode: the originals from {run_name} ({host_task}), {len(entry.items)} of its {run_items} "
        "items, each matched by its question, options and gold"
    )
