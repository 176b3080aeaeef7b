"""The one client for OpenAI-compatible chat endpoints (OpenAI, vLLM, Ollama, llama.cpp servers).

Retries with backoff on 408/409/429/5xx, connection errors and timeouts (honouring Retry-After)
are the `openai` SDK's own; this module adds what the pipelines need around it: configuration from
a file or the environment, images sent inline, bounded concurrency, token and cost accounting, and a
count of failed calls that the commands turn into a non-zero exit. The API key is read from the
environment at call time and never stored in a config or manifest; every reply and error text
that leaves this module is redacted (lmms_contam/redact.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from PIL import Image
from tqdm.auto import tqdm

from lmms_contam.imaging import data_uri
from lmms_contam.redact import environment_secrets, redact, redact_url

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S", bound="PromptSettings")
THINKING = re.compile(r"<think>.*?</think>", re.S)


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to call; safe to write into a manifest (it holds the key's name, not the key)."""

    model: str = "gpt-4o"
    base_url: str | None = None  # None: $OPENAI_BASE_URL, else OpenAI's API
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 6
    timeout_s: float = 120.0
    concurrency: int = 8
    usd_per_million_input: float = 0.0
    usd_per_million_output: float = 0.0

    @classmethod
    def from_dict(cls, values: dict) -> EndpointConfig:
        if "api_key" in values:
            raise ValueError("put the API key in the environment variable named by api_key_env, not in a config")
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown endpoint setting(s): {', '.join(sorted(unknown))}")
        return cls(**values)

    def as_dict(self) -> dict:
        return {**asdict(self), "base_url": redact_url(self.base_url)}


@dataclass(frozen=True)
class ChatResult:
    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    model: str


class Usage:
    """Running totals across threads, for progress bars and manifests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = self.input_tokens = self.output_tokens = 0
        self.cost_usd = 0.0

    def add(self, result: ChatResult) -> None:
        with self._lock:
            self.calls += 1
            self.input_tokens += result.input_tokens
            self.output_tokens += result.output_tokens
            self.cost_usd += result.cost_usd

    def as_dict(self) -> dict:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
        }


class CallOutcomes:
    """Items whose API work failed (after the SDK's retries), and items that have a result (from a call
    or from the store)."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._lock = threading.Lock()
        self.failed = self.succeeded = 0
        self.first_error = ""

    def add_failure(self, message: str) -> None:
        with self._lock:
            self.failed += 1
            self.first_error = self.first_error or message

    def add_success(self) -> None:
        with self._lock:
            self.succeeded += 1

    def problem(self, max_failure_rate: float) -> str | None:
        """Why this stage's results cannot be trusted, or None: no call succeeded, or too many failed."""
        attempted = self.failed + self.succeeded
        if not self.failed:
            return None
        if not self.succeeded:
            return f"{self.stage}: every API call failed ({self.failed} item(s)); first error: {self.first_error}"
        if self.failed / attempted > max_failure_rate:
            return (
                f"{self.stage}: {self.failed} of {attempted} item(s) failed, more than the allowed "
                f"{max_failure_rate:.0%} (--max-failure-rate); first error: {self.first_error}"
            )
        return None

    def as_dict(self) -> dict:
        return {"succeeded": self.succeeded, "failed": self.failed, "first_error": self.first_error}


class TooManyFailures(RuntimeError):
    """A command's API calls failed too often for its result to mean anything (exit 1, counts kept)."""


def failure_problems(outcomes: Iterable[CallOutcomes], max_failure_rate: float) -> list[str]:
    """Each stage's reason to distrust its results (CallOutcomes.problem), where it has one."""
    return [problem for o in outcomes if (problem := o.problem(max_failure_rate))]


def read_template(path: str | Path, placeholders: Iterable[str], stage: str) -> str:
    """A prompt template file, checked for the placeholders its stage fills."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {stage} prompt template there")
    text = path.read_text()
    missing = [f"{{{name}}}" for name in placeholders if f"{{{name}}}" not in text]
    if missing:
        raise ValueError(f"{path}: the {stage} template needs {', '.join(missing)}")
    return text


@dataclass(frozen=True)
class PromptSettings:
    """A stage's prompt template and how it is asked. A stage subclasses it with its own defaults,
    PLACEHOLDERS (what its template must hold) and NAME (for messages); every field is part of what a
    stored reply was computed from."""

    PLACEHOLDERS: ClassVar[tuple[str, ...]] = ()
    NAME: ClassVar[str] = "prompt"

    template: str
    temperature: float | None = 0.0  # None: omit (reasoning models refuse the parameter)
    max_tokens: int = 800
    seed: int | None = None  # None: omit, for servers that refuse it
    structured_output: bool = False  # a JSON-schema response_format, where the server supports it

    @classmethod
    def from_file(cls: type[S], path: str | Path, **overrides) -> S:
        return cls(template=read_template(path, cls.PLACEHOLDERS, cls.NAME), **overrides)

    @property
    def template_sha256(self) -> str:
        return hashlib.sha256(self.template.encode()).hexdigest()

    def described(self) -> dict:
        """The settings with the template by its hash: for cache inputs and manifests."""
        return {**asdict(self), "template": self.template_sha256}

    def request_params(self, schema: dict | None = None, replica: int = 0) -> dict:
        """The request's keyword arguments; `schema` is used when structured output is on, and replica r
        asks with seed + r (an independent re-judgement)."""
        params: dict = {"max_tokens": self.max_tokens}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.seed is not None:
            params["seed"] = self.seed + replica
        if self.structured_output and schema is not None:
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        return params


def image_part(image: Image.Image, max_side: int = 1024) -> dict:
    """An image as an inline data-URI content part (PNG, shrunk to max_side)."""
    return {"type": "image_url", "image_url": {"url": data_uri(image, max_side)}}


class ChatClient:
    def __init__(self, config: EndpointConfig, stage: str = "API") -> None:
        from openai import OpenAI

        self.config = config
        self.usage = Usage()
        self.outcomes = CallOutcomes(stage)
        self._secrets = environment_secrets(config.api_key_env)
        # Local servers take any key; OpenAI's API refuses a missing one with a clear error.
        key = os.environ.get(config.api_key_env) or ("not-needed" if config.base_url else None)
        self._client = OpenAI(
            api_key=key,
            base_url=config.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            max_retries=config.max_retries,
            timeout=config.timeout_s,
        )

    def identity(self) -> dict:
        """What decides the answers apart from the request: the model and the server it is asked on."""
        return {"model": self.config.model, "base_url": redact_url(str(self._client.base_url))}

    def redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def describe(self, error: BaseException) -> str:
        """An error as text that may be stored or logged."""
        return self.redact(f"{type(error).__name__}: {error}")

    def complete(self, messages: list[dict], **params) -> ChatResult:
        response = self._client.chat.completions.create(model=self.config.model, messages=messages, **params)
        usage = response.usage
        input_tokens = usage.prompt_tokens if usage else 0
        output_tokens = usage.completion_tokens if usage else 0
        result = ChatResult(
            text=self.redact(response.choices[0].message.content or ""),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=(
                input_tokens * self.config.usd_per_million_input + output_tokens * self.config.usd_per_million_output
            )
            / 1e6,
            model=response.model or self.config.model,
        )
        self.usage.add(result)
        return result

    def map(self, work: Callable[[T], R], items: Iterable[T], desc: str) -> list[R | BaseException]:
        """Run `work` over items with bounded concurrency; a failure is returned in place, not raised, and
        counted in `outcomes` as every success is."""
        items = list(items)

        def guarded(item: T) -> R | BaseException:
            try:
                result = work(item)
            except Exception as exc:  # recorded per item by the caller
                self.outcomes.add_failure(self.describe(exc))
                return exc
            self.outcomes.add_success()
            return result

        pool = ThreadPoolExecutor(max_workers=max(1, self.config.concurrency))
        try:
            return list(tqdm(pool.map(guarded, items), total=len(items), desc=desc, disable=len(items) < 2))
        except BaseException:  # Ctrl-C: the calls in flight finish (and are stored), the queued ones are dropped
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)


def json_reply(text: str, read: Callable[[dict], R | None]) -> R | None:
    """The last flat JSON object in a model's reply that `read` accepts; reasoning models' <think>
    blocks and any prose around the object are skipped. None when nothing usable is there."""
    text = THINKING.sub("", text)
    for match in reversed(list(re.finditer(r"\{.*?\}", text, re.S))):
        try:
            payload = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        value = read(payload) if isinstance(payload, dict) else None
        if value is not None:
            return value
    return None
