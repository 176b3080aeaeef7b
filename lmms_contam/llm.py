"""The one client for OpenAI-compatible chat endpoints (OpenAI, vLLM, Ollama, llama.cpp servers).

Retries with backoff on 408/409/429/5xx, connection errors and timeouts (honouring Retry-After)
are the `openai` SDK's own; this module adds what the pipelines need around it: configuration from
a file or the environment, images sent inline, bounded concurrency, and token and cost accounting.
The API key is read from the environment at call time and never stored in a config or manifest.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from PIL import Image
from tqdm.auto import tqdm

T = TypeVar("T")
R = TypeVar("R")
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
        return asdict(self)


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
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6)}  # fmt: skip


class PromptTemplate:
    """A prompt template file, checked for the placeholders its stage fills."""

    def __init__(self, path: str | Path, placeholders: Iterable[str], stage: str) -> None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no {stage} prompt template there")
        self.text = path.read_text()
        missing = [f"{{{name}}}" for name in placeholders if f"{{{name}}}" not in self.text]
        if missing:
            raise ValueError(f"{path}: the {stage} template needs {', '.join(missing)}")


def image_part(image: Image.Image, max_side: int = 1024) -> dict:
    """An image as an inline data-URI content part (PNG, shrunk to max_side)."""
    copy = image.convert("RGB")
    copy.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    copy.save(buffer, format="PNG")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}


class ChatClient:
    def __init__(self, config: EndpointConfig) -> None:
        from openai import OpenAI

        self.config = config
        self.usage = Usage()
        # Local servers take any key; OpenAI's API refuses a missing one with a clear error.
        key = os.environ.get(config.api_key_env) or ("not-needed" if config.base_url else None)
        self._client = OpenAI(
            api_key=key,
            base_url=config.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            max_retries=config.max_retries,
            timeout=config.timeout_s,
        )

    def complete(self, messages: list[dict], **params) -> ChatResult:
        response = self._client.chat.completions.create(model=self.config.model, messages=messages, **params)
        usage = response.usage
        input_tokens = usage.prompt_tokens if usage else 0
        output_tokens = usage.completion_tokens if usage else 0
        result = ChatResult(
            text=response.choices[0].message.content or "",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=(
                input_tokens * self.config.usd_per_million_input + output_tokens * self.config.usd_per_million_output
            )
            / 1e6,  # fmt: skip
            model=response.model or self.config.model,
        )
        self.usage.add(result)
        return result

    def map(self, work: Callable[[T], R], items: Iterable[T], desc: str) -> list[R | BaseException]:
        """Run `work` over items with bounded concurrency; a failure is returned in place, not raised."""
        items = list(items)

        def guarded(item: T) -> R | BaseException:
            try:
                return work(item)
            except Exception as exc:  # recorded per item by the caller
                return exc

        with ThreadPoolExecutor(max_workers=max(1, self.config.concurrency)) as pool:
            return list(tqdm(pool.map(guarded, items), total=len(items), desc=desc, disable=len(items) < 2))


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
