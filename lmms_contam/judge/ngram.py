"""The deterministic pre-filter: does a caption contain words of the gold option that no other
option and not the question itself contain?

Short n-grams (alt-text is short), case-folded words. Grams made only of stop words, and grams
that also occur in another option or in the question, say nothing about the answer and are left
out; a yes/no answer therefore never hits. A hit is a hint for the judge and a number for users
without an API budget, not a verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lmms_contam.judge.candidates import MatchedSample

WORD = re.compile(r"\w+", re.UNICODE)
MAX_N = 2
STOP_WORDS = frozenset(
    (
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "which",
        "what",
        "who",
        "whom",
        "whose",
        "how",
        "why",
        "when",
        "where",
        "yes",
        "no",
        "not",
        "none",
        "all",
        "both",
        "some",
        "any",
        "other",
        "image",
        "picture",
        "photo",
        "shown",
        "above",
        "below",
        "option",
        "options",
        "answer",
        "question",
    )
)


@dataclass(frozen=True)
class PrefilterHit:
    caption: int  # index into the candidate's captions
    gram: str


def words(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def grams(text: str, max_n: int = MAX_N) -> set[str]:
    tokens = words(text)
    return {" ".join(tokens[i : i + n]) for n in range(1, max_n + 1) for i in range(len(tokens) - n + 1)}


def question_stem(question: str, options: tuple[str, ...]) -> str:
    """The question without its listed options (benchmarks list them last, so the last occurrence of
    each option text goes); what the stem itself says stays."""
    for option in sorted(options, key=len, reverse=True):
        at = question.rfind(option)
        if option and at >= 0:
            question = f"{question[:at]} {question[at + len(option) :]}"
    return question


def answer_grams(candidate: MatchedSample, max_n: int = MAX_N) -> set[str]:
    """Grams of the gold option that tell it apart from every other option and from the question."""
    others = set().union(set(), *(grams(o, max_n) for o in candidate.options if o != candidate.answer_text))
    informative = {g for g in grams(candidate.answer_text, max_n) if not set(g.split()) <= STOP_WORDS}
    return informative - others - grams(question_stem(candidate.question, candidate.options), max_n)


def prefilter(candidate: MatchedSample, max_n: int = MAX_N) -> PrefilterHit | None:
    """The first caption (best match first) holding a discriminative answer gram, longest gram first."""
    wanted = sorted(answer_grams(candidate, max_n), key=lambda g: (-len(g.split()), g))
    for index, caption in enumerate(candidate.captions):
        found = grams(caption, max_n)
        for gram in wanted:
            if gram in found:
                return PrefilterHit(index, gram)
    return None
