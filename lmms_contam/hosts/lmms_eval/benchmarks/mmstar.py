"""MMStar in lmms-eval: its built-in task's scoring, and a set row as that task's document."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, LmmsEvalBinding

MMSTAR_SCORER = BuiltinScorer(
    module="lmms_eval.tasks.mmstar.utils",
    process_results="mmstar_process_results",
    read_correct=lambda _doc, out: int(out["average"]["score"]),
)


def mmstar_doc(row: dict, answer: str, _image_field: str) -> dict:
    return {
        "index": row["original_id"],
        "question": row["question"],
        "answer": answer,
        "category": row["category"],
        "l2_category": row["l2_category"],
    }


BINDING = LmmsEvalBinding(
    MMSTAR_SCORER,
    mmstar_doc,
    builtin_yaml="mmstar/mmstar.yaml",
    logged_id=lambda sample: str(sample["average"]["question_id"]),
    builtin_aggregations=("mmstar_aggregate_results",),
    letter_request_in_post_prompt=True,
)
