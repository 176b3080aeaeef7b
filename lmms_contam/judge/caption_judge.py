"""The LLM judge: is a sample's answer inferable from its matched captions?

Structured JSON output where the server supports it, temperature 0 and a fixed seed, the project's
prompt template (or the user's); every verdict is cached under (sample, model, replica) with the
digest of everything it was computed from (the prompt with the question, options, answer and
captions; the request's settings; the server), so a rerun makes no call it made before and a
changed input is judged again. A reply that stays unusable
after the retries is recorded as unjudged: it is never counted as clean.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from lmms_contam.judge import ANSWERABLE, NOT_ANSWERABLE, UNJUDGED
from lmms_contam.judge.candidates import Candidate
from lmms_contam.llm import ChatClient, PromptTemplate, json_reply
from lmms_contam.schema import option_letters
from lmms_contam.store import StageStore

STAGE = "caption_judge"
DEFAULT_TEMPLATE = Path(__file__).resolve().parents[1] / "configs" / "judge" / "caption_judge.txt"


def verdict_schema(n_captions: int) -> dict:
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


def parse_verdict(text: str, n_captions: int) -> Verdict | None:
    def read(payload: dict) -> Verdict | None:
        answerable, caption = payload.get("answerable"), payload.get("caption", 0)
        if not isinstance(answerable, bool) or isinstance(caption, bool) or not isinstance(caption, int):
            return None
        if not 0 <= caption <= n_captions:
            return None
        return Verdict(answerable, caption, str(payload.get("reason", ""))[:300])

    return json_reply(text, read)


@dataclass(frozen=True)
class JudgeSettings:
    template: str
    temperature: float | None = 0.0  # None: omit (reasoning models refuse the parameter)
    seed: int | None = 0  # None: omit, for servers that refuse it
    max_tokens: int = 600
    structured_output: bool = True
    attempts: int = 3  # an unusable reply is asked again, up to this many calls in all

    @classmethod
    def from_file(cls, path: str | Path = DEFAULT_TEMPLATE, **overrides) -> JudgeSettings:
        return cls(
            template=PromptTemplate(path, ("question", "options", "answer", "captions"), "caption judge").text,
            **overrides,
        )

    @property
    def template_sha256(self) -> str:
        return hashlib.sha256(self.template.encode()).hexdigest()


def cache_key(candidate: Candidate, model: str, replica: int) -> str:
    """Which verdict a record is: the sample, the judge model and the replica (what it was computed from is
    the record's inputs, checked on reuse)."""
    return f"{candidate.benchmark}-{candidate.original_id}-{model}-r{replica}"


def prompt(candidate: Candidate, settings: JudgeSettings) -> str:
    letters = option_letters(len(candidate.options))
    return settings.template.format(
        question=candidate.question,
        options="\n".join(f"{letter}. {text}" for letter, text in zip(letters, candidate.options, strict=True)),
        answer=candidate.answer_text,
        captions="\n".join(f"{i}. {caption}" for i, caption in enumerate(candidate.captions, 1)),
    )


def judge(client: ChatClient, store: StageStore, candidate: Candidate, settings: JudgeSettings, replica: int = 0
          ) -> tuple[dict, bool]:  # fmt: skip
    """The stored verdict record and whether it came from the cache. Replicas > 0 are independent
    re-judgements (another seed), for the agreement rate."""
    params: dict = {"max_tokens": settings.max_tokens}
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    if settings.seed is not None:
        params["seed"] = settings.seed + replica
    if settings.structured_output:
        params["response_format"] = {"type": "json_schema", "json_schema": verdict_schema(len(candidate.captions))}
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
        verdict = parse_verdict(result.text, len(candidate.captions))
        if verdict is not None:
            break
    outcome = UNJUDGED if verdict is None else (ANSWERABLE if verdict.answerable else NOT_ANSWERABLE)
    record = {
        "outcome": outcome, "caption": verdict.caption if verdict else None,
        "reason": verdict.reason if verdict else "no usable JSON verdict after "
        f"{len(replies)} call(s)", "replies": replies, "model": model, "input_tokens": tokens[0],
        "output_tokens": tokens[1], "cost_usd": cost, "template_sha256": settings.template_sha256,
        "replica": replica,
    }  # fmt: skip
    return store.put(STAGE, key, inputs, record), False
