"""The text VLMEvalKit asks a custom multiple-choice item with (its ImageMCQDataset.build_prompt): what a model
trained for VLMEvalKit reads, and what the tests check VLMEvalKit really sends."""

from __future__ import annotations

from collections.abc import Sequence

from lmms_contam.letters import option_letters

INSTRUCTION = "Please select the correct answer from the options above. \n"


def mcq_prompt(question: str, options: Sequence[str], hint: str | None = None) -> str:
    prompt = f"Hint: {hint}\n" if hint else ""
    prompt += f"Question: {question}\n"
    if options:
        listed = "".join(
            f"{letter}. {text}\n" for letter, text in zip(option_letters(len(options)), options, strict=True)
        )
        prompt += f"Options:\n{listed}{INSTRUCTION}"
    return prompt
