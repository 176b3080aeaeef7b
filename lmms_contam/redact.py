"""One redaction for every error or reply text that is stored or logged.

Some OpenAI-compatible servers echo the request's key in their error messages, and a model's reply
is stored verbatim: either could carry a secret into a parquet file, a manifest or a log. Removed:
the secrets the caller names (the configured key), any bearer token, `key=value` credential or
`user:password@` in a URL, and anything shaped like a provider's key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

MASK = "[redacted]"
BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
ASSIGNED = re.compile(
    r"(?i)\b(api[-_ ]?key|access[-_ ]?token|token|secret|password)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{8,}"
)
PROVIDER_KEY = re.compile(
    r"sk-[A-Za-z0-9_-]{16,}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), many proxies
    r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|AIza[0-9A-Za-z_-]{30,}"  # Google
    r"|xai-[A-Za-z0-9]{20,}|gsk_[A-Za-z0-9]{20,}|r8_[A-Za-z0-9]{20,}"  # xAI, Groq, Replicate
)
# user:password@ (or token@) in a URL: some servers and mirrors take their credentials that way.
URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
SECRET_VARIABLES = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN")


def environment_secrets(*names: str) -> list[str]:
    """Values of the named variables and of the usual secret variables, where set."""
    return [value for name in (*names, *SECRET_VARIABLES) if len(value := os.environ.get(name, "")) >= 4]


def redact_url(url: str | None) -> str | None:
    """A URL as it may be recorded: without the credentials it may carry."""
    return None if url is None else URL_CREDENTIALS.sub(lambda match: f"{match[1]}{MASK}@", url)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without the given secrets, bearer tokens or provider-shaped keys."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    text = PROVIDER_KEY.sub(MASK, redact_url(text))
    text = BEARER.sub(lambda match: f"{match[1]}{MASK}", text)
    return ASSIGNED.sub(lambda match: f"{match[1]}{match[2]}{MASK}", text)
