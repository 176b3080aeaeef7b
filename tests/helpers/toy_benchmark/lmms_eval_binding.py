"""The toy benchmark's lmms-eval layer: MMStar's built-in prompt and scoring, with a document of its own shape
(its options, a field of the set, listed in the question as MMStar's questions list theirs)."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.benchmarks.mmstar import MMSTAR_SCORER
from lmms_contam.hosts.lmms_eval.builtin import LmmsEvalBinding
from lmms_contam.letters import option_letters


def toyquiz_doc(row: dict, answer: str, _image_field: str) -> dict:
    letters = option_letters(len(row["options"]))
    listed = ", ".join(f"{letter}: {text}" for letter, text in zip(letters, row["options"], strict=True))
    return {
        "index": row["original_id"],
        "question": f"{row['question']}\nOptions: {listed}",
        "answer": answer,
        "category": row["topic"],
        "l2_category": row["topic"],
    }


BINDING = LmmsEvalBinding(MMSTAR_SCORER, toyquiz_doc, builtin_yaml="mmstar/mmstar.yaml")
