"""NaturalBench in lmms-eval: a set row as its built-in task's document, and its correctness read from the
built-in output, which scores a reply by the value it extracts."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, LmmsEvalBinding


def naturalbench_doc(row: dict, answer: str, _image_field: str) -> dict:
    return {
        "Index": row["original_id"],
        "Question": row["question"],
        "Question_Type": row["question_type"],
        "Answer": answer,
    }


def naturalbench_gold_value(answer: str) -> int:
    """The built-in extractor maps Yes/A to 1 and No/B to 0; gold answers map the same way."""
    normalized = answer.strip().lower()
    if normalized in ("yes", "a"):
        return 1
    if normalized in ("no", "b"):
        return 0
    raise ValueError(f"NaturalBench answer must be Yes/No or A/B, got {answer!r}")


BINDING = LmmsEvalBinding(
    BuiltinScorer(
        module="lmms_eval.tasks.naturalbench.utils",
        process_results="naturalbench_process_results",
        read_correct=lambda doc, out: int(out["naturalbench_G_ACC"]["score"] == naturalbench_gold_value(doc["Answer"])),
    ),
    naturalbench_doc,
    builtin_yaml="naturalbench/naturalbench.yaml",
    doc_to_target="Answer",
    image_field="Image",
)
