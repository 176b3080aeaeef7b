"""Adapters to lmms-eval's built-in tasks: our rows become the docs their functions expect.

The plugin's tasks call the built-in prompt, answer extraction and scoring functions unchanged;
this module only shapes the documents and reads a 0/1 correctness back from the built-in output.
"""

from __future__ import annotations

import importlib
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from lmms_contam.letters import option_letters
from lmms_contam.records import ORIGINAL
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
    stratified: bool = False  # its accuracies are macro averages over l2_category (MMStar's are)

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
            contam_stratum=row["l2_category"] if self.stratified else "",
            contam_group=row.get("group_id") or "",
            contam_slot=row.get("group_slot") or "",
        )
        return doc


def mmstar_doc(row: dict, answer: str, _image_field: str) -> dict:
    return {
        "index": row["original_id"],
        "question": row["question"],
        "answer": answer,
        "category": row["category"],
        "l2_category": row["l2_category"],
    }


def realworldqa_doc(row: dict, answer: str, _image_field: str) -> dict:
    return {"question": row["question"], "answer": answer}


def naturalbench_doc(row: dict, answer: str, _image_field: str) -> dict:
    return {
        "Index": row["original_id"],
        "Question": row["question"],
        "Question_Type": row["question_type"],
        "Answer": answer,
    }


def seedbench_doc(row: dict, answer: str, _image_field: str) -> dict:
    choices = dict(zip(("choice_a", "choice_b", "choice_c", "choice_d"), row["options"], strict=True))
    return {
        "question_id": row["original_id"],
        "question": row["question"],
        **choices,
        "answer": answer,
        "data_type": "image",
    }


MMBENCH_LETTERS = "ABCD"


def mmbench_doc(row: dict, answer: str, _image_field: str) -> dict:
    """The hint is already the head of the question (the parser joins them as the built-in prompt does); options
    it lacks are "nan", as in the hub's rows."""
    if len(row["options"]) > len(MMBENCH_LETTERS):
        raise ValueError(f"MMBench item {row['original_id']} has {len(row['options'])} options; its rows hold 4")
    options = dict(zip(MMBENCH_LETTERS, row["options"], strict=False))
    return {
        "index": int(row["original_id"]),
        "question": row["question"],
        "hint": "nan",
        **{letter: options.get(letter, "nan") for letter in MMBENCH_LETTERS},
        "answer": answer,
        "category": row["category"],
        "L2-category": row["l2_category"],
        "source": "",
        "split": "dev",
    }


def scienceqa_doc(row: dict, answer: str, _image_field: str) -> dict:
    """The built-in reads the answer as an index into `choices`."""
    return {
        "hint": row["hint"],
        "question": row["question"],
        "choices": list(row["options"]),
        "answer": option_letters(len(row["options"])).index(answer),
    }


def ai2d_doc(row: dict, answer: str, _image_field: str) -> dict:
    """The built-in reads the answer as an index into `options`, written as text in the hub's rows."""
    return {
        "question": row["question"],
        "options": list(row["options"]),
        "answer": str(option_letters(len(row["options"])).index(answer)),
    }


def ai2d_process_results(doc: dict, results: list) -> dict:
    """What lmms-eval computes for its ai2d task, which has no process_results: the task's filter (a leading
    "X." becomes X), then exact match against the letter target, ignoring case and punctuation."""
    from lmms_eval.api.metrics import exact_match_hf_evaluate
    from lmms_eval.tasks.ai2d.utils import MultiChoiceRegexFilter, ai2d_doc_to_target

    (filtered,) = MultiChoiceRegexFilter().apply([[results[0]]], [doc])
    target = ai2d_doc_to_target(doc, "mcq")
    matched = exact_match_hf_evaluate([target], [filtered], ignore_case=True, ignore_punctuation=True)
    return {"exact_match": float(matched["exact_match"])}


def mme_doc(row: dict, answer: str, _image_field: str) -> dict:
    """question_id names the image the pair of questions is about, as in the hub's rows."""
    return {"question_id": row["group_id"], "question": row["question"], "answer": answer, "category": row["category"]}


def mmmu_doc(row: dict, answer: str, _image_field: str) -> dict:
    """The hub writes the options as the text of a Python list, and the id names the subject the built-in's
    aggregation groups by."""
    return {
        "id": row["original_id"],
        "question": row["question"],
        "options": repr(list(row["options"])),
        "question_type": "multiple-choice",
        "answer": answer,
    }


def mmmu_correct(_doc: dict, output: dict) -> int:
    """The built-in decides correctness only in its aggregation; this is that decision for one document."""
    from lmms_eval.tasks.mmmu.utils import eval_multi_choice

    record = output["mmmu_acc"]
    return int(any(eval_multi_choice(record["answer"], parsed) for parsed in record["parsed_pred"]))


def naturalbench_gold_value(answer: str) -> int:
    """The built-in extractor maps Yes/A to 1 and No/B to 0; gold answers map the same way."""
    normalized = answer.strip().lower()
    if normalized in ("yes", "a"):
        return 1
    if normalized in ("no", "b"):
        return 0
    raise ValueError(f"NaturalBench answer must be Yes/No or A/B, got {answer!r}")


def seedbench_correct(_doc: dict, output: dict) -> int:
    from lmms_eval.tasks.seedbench.utils import seed_aggregation_result

    return int(seed_aggregation_result([output["seed_all"]]))


def mmbench_correct(_doc: dict, output: dict) -> int:
    """The static (no API) matching of lmms-eval's mmbench_en_dev_static, on this one document."""
    import pandas as pd
    from lmms_eval.tasks.mmbench.en_utils import mmbench_evaluator

    record = output["gpt_eval_score"]
    row = pd.DataFrame([record])
    row["prediction"] = [str(x) for x in row["prediction"]]
    row.columns = [k.lower() if k not in "ABCD" else k for k in row.columns]  # as the built-in evaluator does
    return int(mmbench_evaluator.eval_sub_data(row, {record["index"]: record["answer"]}, static_only=True))
