"""Adapters to lmms-eval's built-in tasks, the parts every benchmark's binding (benchmarks/) shares.

The plugin's tasks call the built-in prompt, answer extraction and scoring functions unchanged; a binding
only shapes the documents and reads a 0/1 correctness back from the built-in output. Kept apart from the
registry (bindings.py) so that the benchmark modules it lists can import them.
"""

from __future__ import annotations

import importlib
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from lmms_contam.records import ORIGINAL
from lmms_contam.registry.specs import spec
from lmms_contam.stats import stable_seed

_draw_lock = threading.Lock()


@contextmanager
def drawing_for(doc: dict) -> Iterator[None]:
    """Python's global `random`, seeded from the document's id and version for the duration, then put back as
    it was: a built-in that draws a letter for a reply naming none draws the same one for this document in
    any run, whatever else the process scored before it, and the built-in tasks' own draws go on unchanged."""
    with _draw_lock:
        state = random.getstate()
        random.seed(stable_seed(doc["contam_item_id"], doc.get("contam_variant", ORIGINAL)))
        try:
            yield
        finally:
            random.setstate(state)


@dataclass(frozen=True)
class BuiltinScorer:
    module: str  # the built-in task's utils module
    process_results: str  # name of the built-in process_results function in `module`
    read_correct: Callable[[dict, dict], int]  # (doc, built-in output) -> 0/1
    draws: bool = False  # the built-in draws from Python's global `random` (MMMU, for replies naming no letter)

    def score(self, doc: dict, results: list) -> tuple[dict, int]:
        """The built-in output for one document, and the 0/1 correctness read back from it."""
        process = getattr(importlib.import_module(self.module), self.process_results)
        with drawing_for(doc) if self.draws else nullcontext():
            output = process(doc, results)
        return output, self.read_correct(doc, output)


@dataclass(frozen=True)
class BuiltinTask:
    benchmark: str
    scorer: BuiltinScorer
    image_field: str
    shape_doc: Callable[[dict, str, str], dict]  # (row, answer, image field) -> built-in-shaped fields
    image_list: bool = False  # the image field holds a list of images

    def doc(self, row: dict, *, variant: str, gold: str, image: Any, shown: dict | None = None) -> dict[str, Any]:
        """A document showing `image` (none: None) and the row, with `shown`'s fields (a question and options in
        another order) in place of the row's, and `gold` as the answer."""
        doc = self.shape_doc({**row, **(shown or {})}, gold, self.image_field)
        doc[self.image_field] = [image] if self.image_list and image is not None else image
        doc.update(
            contam_item_id=row["item_id"],
            contam_original_id=row["original_id"],
            contam_benchmark=self.benchmark,
            contam_variant=variant,
            contam_gold=gold,
            contam_original_answer=row["original_answer"],
            contam_n_options=len(row["options"]),
            contam_stratum=spec(self.benchmark).stratum(row),
            contam_group=row.get("group_id") or "",
            contam_slot=row.get("group_slot") or "",
        )
        return doc


def exact_match_scorer(module: str, process_results: str) -> BuiltinScorer:
    """A built-in whose output's `exact_match` is the 0/1 correctness."""
    return BuiltinScorer(module, process_results, lambda _doc, out: int(out["exact_match"]))


@dataclass(frozen=True)
class LmmsEvalBinding:
    """How lmms-eval runs one benchmark; `lmms-contam tasks generate` writes its task YAMLs from it."""

    scorer: BuiltinScorer  # the built-in process_results, and how a 0/1 correctness is read from it
    shape_doc: Callable[[dict, str, str], dict]  # a perturbed-set row as the built-in's document
    builtin_yaml: str | None = None  # the built-in task (under lmms_eval/tasks/) whose prompts and scoring are reused
    own_task_yaml: str | None = None  # in lmms-eval's format, under lmms_contam/: a benchmark lmms-eval lacks
    doc_to_target: str | None = None  # where the built-in names a column its dataset does not have
    applied_by_scorer: tuple[str, ...] = ()  # blocks of the built-in task its scorer applies itself, so not carried
    image_field: str = "image"  # the built-in task's image column
    image_list: bool = False  # the column holds a list of images (SEED-Bench's frames; one for image items)
    # The item's original id in a sample line of the built-in task, where its logged output names one (lmms-eval
    # does not log the document): leaderboard mode pairs such a run with the `*_perturbed` task by it.
    logged_id: Callable[[dict], str] | None = None
    # The built-in's aggregation functions (in its scorer's module) that compute from the samples alone, with no
    # judge, file or network: the report recomputes a built-in run's figures with them.
    builtin_aggregations: tuple[str, ...] = ()
    # Its default post-prompt is the request for the option's letter (MMStar's "Answer with the option's letter..."),
    # which a detector asking for an option's text replaces. Where the request is elsewhere (RealWorldQA's questions,
    # the templates of SEED-Bench and MMMU) it cannot be replaced, and such a detector has no task.
    letter_request_in_post_prompt: bool = False
