"""MMBench in lmms-eval: a set row as its built-in static task's document, and the correctness its static
(no API) matching gives one document."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, LmmsEvalBinding

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


def mmbench_correct(_doc: dict, output: dict) -> int:
    """The static (no API) matching of lmms-eval's mmbench_en_dev_static, on this one document."""
    import pandas as pd
    from lmms_eval.tasks.mmbench.en_utils import mmbench_evaluator

    record = output["gpt_eval_score"]
    row = pd.DataFrame([record])
    row["prediction"] = [str(x) for x in row["prediction"]]
    row.columns = [k.lower() if k not in "ABCD" else k for k in row.columns]  # as the built-in evaluator does
    return int(mmbench_evaluator.eval_sub_data(row, {record["index"]: record["answer"]}, static_only=True))


BINDING = LmmsEvalBinding(
    BuiltinScorer("lmms_eval.tasks.mmbench.en_utils", "mmbench_process_results", mmbench_correct),
    mmbench_doc,
    builtin_yaml="mmbench/mmbench_en_dev_static.yaml",
    logged_id=lambda sample: str(sample["gpt_eval_score"]["index"]),
    letter_request_in_post_prompt=True,
)
