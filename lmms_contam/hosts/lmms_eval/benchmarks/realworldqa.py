"""RealWorldQA in lmms-eval: its built-in task's exact match, and a set row as that task's document."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import LmmsEvalBinding, exact_match_scorer


def realworldqa_doc(row: dict, answer: str, _image_field: str) -> dict:
    return {"question": row["question"], "answer": answer}


BINDING = LmmsEvalBinding(
    exact_match_scorer("lmms_eval.tasks.realworldqa.utils", "realworldqa_process_results"),
    realworldqa_doc,
    builtin_yaml="realworldqa/realworldqa.yaml",
)
