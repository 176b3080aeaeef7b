"""Errors lmms-eval would swallow, said once in its output.

lmms-eval retries a failing dataset load and then swallows the exception, so a task's reason to refuse
(no set, a damaged row, a scan of another benchmark) is logged as an error, once per process. Messages
that quote an object's repr differ by its address each time: those are compared without it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TypeVar

from loguru import logger

from lmms_contam.schema import PerturbedSetError

T = TypeVar("T")
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_reported: set[str] = set()
_lock = threading.Lock()


def log_error_once(message: str) -> None:
    key = ADDRESS.sub("", message)
    with _lock:
        if key in _reported:
            return
        _reported.add(key)
    logger.error(message)


def said_once(load: Callable[[], T]) -> T:
    """`load()`, its refusal (a PerturbedSetError) logged once before it is raised to lmms-eval."""
    try:
        return load()
    except PerturbedSetError as exc:
        log_error_once(str(exc))
        raise
