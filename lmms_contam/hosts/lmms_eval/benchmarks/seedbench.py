"""SEED-Bench in lmms-eval: a set row as its built-in task's document (the image a one-frame list), and its
correctness read from the built-in output."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, LmmsEvalBinding


def seedbench_doc(row: dict, answer: str, _image_field: str) -> dict:
    choices = dict(zip(("choice_a", "choice_b", "choice_c", "choice_d"), row["options"], strict=True))
    return {
        "question_id": row["original_id"],
        "question": row["question"],
        **choices,
        "answer": answer,
        "data_type": "image",
    }


def seedbench_correct(_doc: dict, output: dict) -> int:
    from lmms_eval.tasks.seedbench.utils import seed_aggregation_result

    return int(seed_aggregation_result([output["seed_all"]]))


BINDING = LmmsEvalBinding(
    BuiltinScorer("lmms_eval.tasks.seedbench.utils", "seed_process_result", seedbench_correct),
    seedbench_doc,
    builtin_yaml="seedbench/seedbench.yaml",
    image_list=True,
    logged_id=lambda sample: str(sample["seed_all"]["question_id"]),
    builtin_aggregations=("seed_aggregation_result",),
)
