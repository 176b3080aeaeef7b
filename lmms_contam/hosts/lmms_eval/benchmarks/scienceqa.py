"""ScienceQA-IMG in lmms-eval: its built-in task's exact match, and a set row as that task's document."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import LmmsEvalBinding, exact_match_scorer
from lmms_contam.letters import option_letters


def scienceqa_doc(row: dict, answer: str, _image_field: str) -> dict:
    """The built-in reads the answer as an index into `choices`."""
    return {
        "hint": row["hint"],
        "question": row["question"],
        "choices": list(row["options"]),
        "answer": option_letters(len(row["options"])).index(answer),
    }


BINDING = LmmsEvalBinding(
    exact_match_scorer("lmms_eval.tasks.scienceqa.utils", "sqa_process_results"),
    scienceqa_doc,
    builtin_yaml="scienceqa/scienceqa_img.yaml",
    letter_request_in_post_prompt=True,
)
