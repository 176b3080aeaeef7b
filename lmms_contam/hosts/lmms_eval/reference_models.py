"""Deterministic lmms-eval models that give the detectors known answers.

`contam_test_oracle` answers the gold of whichever version it sees: a perfect clean model (both
accuracies 1, delta 0); asked for a hidden option's text, which no reader of the item can see, it says it
cannot know. `contam_test_memoriser` always answers the original item's gold, as a model that memorised
image -> answer would: 1 on originals, 0 on counterfactuals, and the hidden option's text, which it
remembers with the rest of the item. `contam_test_contaminated`
knows only the items a scan flagged (image-only) and answers every other one wrong: the model whose
score leans entirely on the contaminated part. All read the document the harness hands them, so they
work on any task whose docs carry a gold answer.
"""

from __future__ import annotations

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from lmms_contam.detectors.masked_option import MASKED_OPTION
from lmms_contam.letters import option_letters

UNSEEN = "I cannot know"  # what a model that never saw the item says of a hidden option


def _gold(doc: dict) -> str:
    for field in ("contam_gold", "answer", "Answer"):
        if field in doc:
            choices = doc.get("options", doc.get("choices"))
            if isinstance(choices, list) and str(doc[field]).isdigit():  # AI2D, ScienceQA: an index into them
                return option_letters(len(choices))[int(doc[field])]
            return str(doc[field])
    raise KeyError(f"document has no gold answer field; fields: {sorted(doc)}")


def _wrong(gold: str) -> str:
    """An answer every built-in scorer counts wrong: the other of Yes/No, another letter, or nonsense."""
    flips = {"yes": "No", "no": "Yes"}
    if gold.strip().rstrip(".").lower() in flips:
        return flips[gold.strip().rstrip(".").lower()]
    if len(gold) == 1 and gold.isalpha():
        return "B" if gold.upper() == "A" else "A"
    return "no idea"


class _AnswerFromDoc(lmms):
    def __init__(self, **_ignored) -> None:
        super().__init__()

    def answer(self, doc: dict) -> str:
        raise NotImplementedError

    def generate_until(self, requests: list[Instance]) -> list[str]:
        responses = []
        for request in requests:
            _context, _gen_kwargs, _doc_to_visual, doc_id, task, split = request.args
            responses.append(self.answer(self.task_dict[task][split][doc_id]))
        return responses

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError("the contam test models only generate")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError("the contam test models only generate")


def _hides_an_option(doc: dict) -> bool:
    return doc.get("contam_variant") == MASKED_OPTION


class OracleTestModel(_AnswerFromDoc):
    def answer(self, doc: dict) -> str:
        return UNSEEN if _hides_an_option(doc) else _gold(doc)


class MemoriserTestModel(_AnswerFromDoc):
    def answer(self, doc: dict) -> str:
        if _hides_an_option(doc):
            return str(doc["contam_gold"])
        return str(doc.get("contam_original_answer", _gold(doc)))


class ContaminatedTestModel(_AnswerFromDoc):
    def answer(self, doc: dict) -> str:
        gold = _gold(doc)
        return gold if doc.get("contam_image_only") == "flagged" else _wrong(gold)
