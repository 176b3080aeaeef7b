"""MME in lmms-eval: a set row as its built-in task's document, and the correctness its output gives."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, LmmsEvalBinding


def mme_doc(row: dict, answer: str, _image_field: str) -> dict:
    """question_id names the image the pair of questions is about, as in the hub's rows."""
    return {"question_id": row["group_id"], "question": row["question"], "answer": answer, "category": row["category"]}


BINDING = LmmsEvalBinding(
    BuiltinScorer(
        module="lmms_eval.tasks.mme.utils",
        process_results="mme_process_results",
        read_correct=lambda _doc, out: int(next(iter(out.values()))["score"]),
    ),
    mme_doc,
    builtin_yaml="mme/mme.yaml",
)
