"""MMMU in lmms-eval: a set row as its built-in task's document, and the correctness its aggregation would
decide, for one document."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, LmmsEvalBinding


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


BINDING = LmmsEvalBinding(
    BuiltinScorer("lmms_eval.tasks.mmmu.utils", "mmmu_process_results", mmmu_correct, draws=True),
    mmmu_doc,
    builtin_yaml="mmmu/mmmu_val.yaml",
    image_field="image_1",
    logged_id=lambda sample: str(sample["mmmu_acc"]["id"]),
    builtin_aggregations=("mmmu_aggregate_results",),
)
