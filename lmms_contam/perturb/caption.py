"""Stage 2: a VLM writes the edit caption: a text-to-image prompt for the counterfactual image.

Settings as in the paper (GPT-4o, temperature 0.3, at most 800 tokens); the template is the
project's own (configs/perturb/edit_caption.txt) or the user's, and its hash goes into every record.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmms_contam.items import Item
from lmms_contam.llm import ChatClient, PromptSettings, image_part
from lmms_contam.schema import listed_options
from lmms_contam.store import StageStore

STAGE = "caption"


@dataclass(frozen=True)
class CaptionSettings(PromptSettings):
    PLACEHOLDERS = ("question", "options", "original_answer", "new_answer")
    NAME = "edit-caption"

    temperature: float | None = 0.3


def caption_messages(item: Item, new_answer: str, settings: CaptionSettings) -> list[dict]:
    text = settings.template.format(
        question=item.question, options=listed_options(item.options), original_answer=item.answer, new_answer=new_answer
    )
    return [{"role": "user", "content": [image_part(item.image), {"type": "text", "text": text}]}]


def caption_inputs(client: ChatClient, item: Item, new_answer: str, settings: CaptionSettings) -> dict:
    return {
        "item": item.fingerprint(),
        "new_answer": new_answer,
        "endpoint": client.identity(),
        "settings": settings.described(),
    }


def write_caption(
    client: ChatClient, store: StageStore, item_key: str, item: Item, new_answer: str, settings: CaptionSettings
) -> dict:
    """The stored record if this item was captioned from the same inputs (item, answer, model, server,
    settings); else one API call."""
    inputs = caption_inputs(client, item, new_answer, settings)
    done = store.get(STAGE, item_key, inputs)
    if done is not None:
        return done
    result = client.complete(caption_messages(item, new_answer, settings), **settings.request_params())
    caption = result.text.strip()
    if not caption:
        raise ValueError(f"{item_key}: the captioning model returned an empty caption")
    return store.put(
        STAGE,
        item_key,
        inputs,
        {
            "caption": caption,
            "new_answer": new_answer,
            "model": result.model,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd,
            "template_sha256": settings.template_sha256,
        },
    )
