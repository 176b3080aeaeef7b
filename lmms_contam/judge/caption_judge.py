"""The LLM judge: is a sample's answer inferable from its matched captions?

Structured JSON output where the server supports it, temperature 0 and a fixed seed, the project's
prompt template (or the user's); every verdict is cached under (sample, model, replica) with the
digest of everything it was computed from (the prompt with the question, options, answer and
captions; the request's settings; the server), so a rerun makes no call it made before and a
changed input is judged again. A reply that stays unusable
after the retries is recorded as unjudged: it is never counted as clean.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lmms_contam.judge import ANSWERABLE, NOT_ANSWERABLE, UNJUDGED
from lmms_contam.judge.candidates import MatchedSample
from lmms_contam.llm import ChatClient, PromptSettings, json_reply
from lmms_contam.schema import listed_options
from lmms_contam.store import StageStore

STAGE = "caption_judge"
DEFAULT_TEMPLATE = Path(__file__).resolve().parents[1] / "configs" / "judge" / "caption_judge.txt"


def caption_verdict_schema(n_captions: int) -> dict:
    return {
        "name": "caption_verdict",
        "schema": {
            "type": "object",
            "properties": {
                "answerable": {"type": "boolean"},
                "caption": {"type": "integer", "minimum": 0, "maximum": n_captions},
                "reason": {"type": "string", "maxLength": 300},
            },
            "required": ["answerable", "caption", "reason"],
            "additionalProperties": False,
        },
    }


@dataclass(frozen=True)
class Verdict:
    answerable: bool
    caption: int  # 1-based index of the caption that gives the answer away; 0 for none (or not named)
    reason: str


def parse_caption_verdict(text: str, n_captions: int) -> Verdict | None:
    def read(payload: dict) -> Verdict | None:
        answerable, caption = payload.get("answerable"), payload.get("caption", 0)
        if not isinstance(answerable, bool) or isinstance(caption, bool) or not isinstance(caption, int):
            return None
        if not 0 <= caption <= n_captions:
            return None
        return Verdict(answerable, caption, str(payload.get("reason", ""))[:300])

    return json_reply(text, read)


@dataclass(frozen=True)
class CaptionJudgeSettings(PromptSettings):
    PLACEHOLDERS = ("question", "options", "answer", "captions")
    NAME = "caption judge"

    seed: int | None = 0
    max_tokens: int = 600
    structured_output: bool = True
    attempts: int = 3  # an unusable reply is asked again, up to this many calls in all


def cache_key(candidate: MatchedSample, model: str, replica: int) -> str:
    """Which verdict a record is: the sample, the judge model and the replica (what it was computed from is
    the record's inputs, checked on reuse)."""
    return f"{candidate.benchmark}-{candidate.original_id}-{model}-r{replica}"


def prompt(candidate: MatchedSample, settings: CaptionJudgeSettings) -> str:
    return settings.template.format(
        question=candidate.question,
        options=listed_options(candidate.options),
        answer=candidate.answer_text,
        captions="\n".join(f"{i}. {caption}" for i, caption in enumerate(candidate.captions, 1)),
    )


def judge_captions(
    client: ChatClient, store: StageStore, candidate: MatchedSample, settings: CaptionJudgeSettings, replica: int = 0
) -> tuple[dict, bool]:
    """The stored verdict record and whether it came from the cache. Replicas > 0 are independent
    re-judgements (another seed), for the agreement rate."""
    params = settings.request_params(caption_verdict_schema(len(candidate.captions)), replica)
    messages = [{"role": "user", "content": prompt(candidate, settings)}]
    # The prompt holds the question, options, answer and captions; the rest decides how it is answered.
    inputs = {"messages": messages, "params": params, "attempts": settings.attempts, "endpoint": client.identity()}
    key = cache_key(candidate, client.config.model, replica)
    done = store.get(STAGE, key, inputs)
    if done is not None:
        return done, True
    replies, verdict, tokens, cost, model = [], None, [0, 0], 0.0, client.config.model
    for _ in range(max(1, settings.attempts)):
        result = client.complete(messages, **params)
        replies.append(result.text)
        tokens = [tokens[0] + result.input_tokens, tokens[1] + result.output_tokens]
        cost, model = cost + result.cost_usd, result.model
        verdict = parse_caption_verdict(result.text, len(candidate.captions))
        if verdict is not None:
            break
    outcome = UNJUDGED if verdict is None else (ANSWERABLE if verdict.answerable else NOT_ANSWERABLE)
    record = {
        "outcome": outcome,
        "caption": verdict.caption if verdict else None,
        "reason": verdict.reason if verdict else f"no usable JSON verdict after {len(replies)} call(s)",
        "replies": replies,
        "model": model,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cost_usd": cost,
        "template_sha256": settings.template_sha256,
        "replica": replica,
    }
    return store.put(STAGE, key, inputs, record), False
