"""AI2D in lmms-eval: a set row as its built-in task's document, and the scoring that task does without a
process_results of its own (a filter, then a generic exact match), done here for one document."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import LmmsEvalBinding, exact_match_scorer
from lmms_contam.letters import option_letters


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


# The scorer applies the built-in's filter itself, so the plugin's tasks report `exact_match,none` (the built-in:
# `exact_match,flexible-extract`).
BINDING = LmmsEvalBinding(
    exact_match_scorer(__name__, "ai2d_process_results"),
    ai2d_doc,
    builtin_yaml="ai2d/ai2d.yaml",
    applied_by_scorer=("filter_list",),
    letter_request_in_post_prompt=True,
)
