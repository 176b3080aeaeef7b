"""Stage 4: keep a counterfactual only if it is a valid test item.

Two checks, each stored with its evidence: a judge model over an OpenAI-compatible endpoint (keep
only when exactly one option is right and it is the new answer) and an image drift check (reject an
image the edit left unchanged, and one that no longer resembles the original, which a memorising
model could otherwise pass or fail for the wrong reason).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from lmms_contam.fingerprint import image_sha256
from lmms_contam.items import Item
from lmms_contam.letters import option_letters
from lmms_contam.llm import ChatClient, PromptSettings, image_part, json_reply
from lmms_contam.schema import columns_for, listed_options
from lmms_contam.store import StageStore

JUDGE_STAGE = "judge"
UNJUDGED = "unjudged"


def counterfactual_verdict_schema(n_options: int) -> dict:
    """The judge's reply format: each option letter at most once, and a reason."""
    letters = option_letters(n_options)
    return {
        "name": "verdict",
        "schema": {
            "type": "object",
            "properties": {
                "correct_options": {
                    "type": "array",
                    "items": {"type": "string", "enum": letters},
                    "maxItems": n_options,
                    "uniqueItems": True,
                },
                "reason": {"type": "string", "maxLength": 400},
            },
            "required": ["correct_options", "reason"],
            "additionalProperties": False,
        },
    }


@dataclass(frozen=True)
class CounterfactualJudgeSettings(PromptSettings):
    PLACEHOLDERS = ("question", "options")
    NAME = "verification judge"

    max_tokens: int = 2000
    structured_output: bool = True


# One option letter, as a server that ignores response_format may dress it: "C", " c ", "(C)", "C.".
ONE_LETTER = re.compile(r"^\s*\(?\s*([A-Za-z])\s*\)?\s*[.:]?\s*$")


class UnusableReply(ValueError):
    """A judge reply that is not a verdict: counted as a failed call (never as keep or reject), asked again on
    the next run."""


def parse_counterfactual_verdict(text: str, n_options: int) -> list[str] | None:
    """The option letters the judge called correct; None when its reply is not a verdict: no JSON, or an
    entry that is not exactly one of the options' letters ("C, A" names two; "E" of four options none)."""
    letters = option_letters(n_options)

    def read(payload: dict) -> list[str] | None:
        entries = payload.get("correct_options")
        if not isinstance(entries, list) or not all(isinstance(x, str) for x in entries):
            return None
        matched = [ONE_LETTER.match(x) for x in entries]
        if not all(matched):
            return None
        named = sorted({m[1].upper() for m in matched})
        return named if all(x in letters for x in named) else None

    return json_reply(text, read)


def failure_reason(error: BaseException) -> str:
    """How an item whose judging failed is counted in the outcomes."""
    return f"judge failed: {'unusable reply' if isinstance(error, UnusableReply) else type(error).__name__}"


def judge_counterfactual(
    client: ChatClient,
    store: StageStore,
    key: str,
    item: Item,
    image: Image.Image,
    new_letter: str,
    settings: CounterfactualJudgeSettings,
) -> dict:
    """Stored verdict: keep or reject. Reused only for the same image, question, options, new answer, model,
    server and settings. An unusable reply is stored as "unjudged" (its text and cost kept) and raised as
    UnusableReply, so it counts as a failed call; a rerun asks again."""
    inputs = {
        "image": image_sha256(image),
        "question": item.question,
        "options": list(item.options),
        "new_letter": new_letter,
        "endpoint": client.identity(),
        "settings": settings.described(),
    }
    done = store.get(JUDGE_STAGE, key, inputs)
    if done is not None and done["outcome"] != UNJUDGED:
        return done
    prompt = settings.template.format(question=item.question, options=listed_options(item.options))
    params = settings.request_params(counterfactual_verdict_schema(len(item.options)))
    result = client.complete(
        [{"role": "user", "content": [image_part(image), {"type": "text", "text": prompt}]}], **params
    )
    correct = parse_counterfactual_verdict(result.text, len(item.options))
    outcome = UNJUDGED if correct is None else ("keep" if correct == [new_letter] else "reject")
    stored = store.put(
        JUDGE_STAGE,
        key,
        inputs,
        {
            "outcome": outcome,
            "correct_options": correct,
            "reply": result.text,
            "model": result.model,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd,
            "template_sha256": settings.template_sha256,
        },
    )
    if outcome == UNJUDGED:
        raise UnusableReply(f"the judge's reply names no option unambiguously: {result.text[:120]!r}")
    return stored


def answer_letter(item: Item, answer: str) -> str:
    """The judge speaks in letters; text-answer benchmarks map their answer to its option letter."""
    if columns_for(item.benchmark).answer_style == "letter":
        return answer
    return option_letters(len(item.options))[list(item.options).index(answer)]


def automatic_outcome(drifted: dict, verdict: dict | None) -> str:
    """ "keep", or the first reason to reject: the drift check's, then the judge's."""
    if drifted["outcome"] != "keep":
        return drifted["outcome"]
    if verdict is not None and verdict["outcome"] != "keep":
        return f"judge: {verdict['outcome']}"
    return "keep"


@dataclass(frozen=True)
class DriftSettings:
    # Mean absolute colour change (0-1, over RGB) below which the edit did nothing. In colour, not grey:
    # a recolouring of equal brightness (a red car made blue) is an edit, and grey levels do not see it.
    min_change: float = 0.01
    min_resemblance: float = 0.35  # correlation of small grey thumbnails below which the layout is gone
    size: int = 32


def _thumbnail(image: Image.Image, size: int, mode: str) -> np.ndarray:
    return np.asarray(image.convert(mode).resize((size, size), Image.Resampling.BILINEAR), dtype=float) / 255.0


def drift(original: Image.Image, perturbed: Image.Image, settings: DriftSettings) -> dict:
    change = float(
        np.abs(_thumbnail(original, settings.size, "RGB") - _thumbnail(perturbed, settings.size, "RGB")).mean()
    )
    a, b = _thumbnail(original, settings.size, "L"), _thumbnail(perturbed, settings.size, "L")
    if a.std() == 0 or b.std() == 0:
        resemblance = 1.0 if change < settings.min_change else 0.0
    else:
        resemblance = float(np.corrcoef(a.ravel(), b.ravel())[0, 1])
    if change < settings.min_change:
        outcome = "reject: unchanged"
    elif resemblance < settings.min_resemblance:
        outcome = "reject: no longer resembles the original"
    else:
        outcome = "keep"
    return {"outcome": outcome, "change": round(change, 5), "resemblance": round(resemblance, 5)}


@dataclass(frozen=True)
class CounterfactualJob:
    """One item's counterfactual on its way through the stages: the new answer, then the edit caption, then
    the image with its drift check; `perturb` and `verify` judge the same record."""

    key: str
    item: Item
    new_answer: str
    caption: str = ""
    image: Image.Image | None = None
    drifted: dict | None = None  # the drift check's result, once there is an image

    def with_image(self, image: Image.Image, settings: DriftSettings) -> CounterfactualJob:
        return replace(self, image=image, drifted=drift(self.item.image, image, settings))


def judge_job(
    client: ChatClient, store: StageStore, settings: CounterfactualJudgeSettings
) -> Callable[[CounterfactualJob], dict]:
    """The judge's stored verdict on a job's counterfactual (see judge_counterfactual)."""

    def judge(job: CounterfactualJob) -> dict:
        letter = answer_letter(job.item, job.new_answer)
        return judge_counterfactual(client, store, job.key, job.item, job.image, letter, settings)

    return judge
