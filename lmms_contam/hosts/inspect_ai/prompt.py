"""The text inspect-ai's `multiple_choice()` solver asks a single-answer item with, and the reply its `choice()`
scorer reads: what a model trained for inspect reads and writes, and what the tests check inspect really sends.
Kept free of inspect's imports, so that training on it needs no inspect install."""

from __future__ import annotations

from collections.abc import Sequence

from lmms_contam.letters import option_letters

ANSWER_PREFIX = "ANSWER: "  # a reply inspect parses: "ANSWER: B"
INSTRUCTION = (
    "Answer the following multiple choice question. The entire content of your response should be of the following "
    "format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {letters}."
)


def mcq_prompt(question: str, options: Sequence[str]) -> str:
    letters = option_letters(len(options))
    listed = "\n".join(f"{letter}) {text}" for letter, text in zip(letters, options, strict=True))
    return f"{INSTRUCTION.format(letters=','.join(letters))}\n\n{question}\n\n{listed}"
