"""The ideal reader served as an OpenAI-compatible chat endpoint on 127.0.0.1.

`lmms-contam verify` then runs on a synthetic set exactly as on a real one with a model endpoint:
the same prompt, client, stored verdicts, drift check and kept subset; only the model differs. The
server reads what any judge model reads (the image, the question and the lettered options from the
prompt) and replies in the verification judge's JSON format.
"""

from __future__ import annotations

import json
import re

from lmms_contam.letters import option_letters
from lmms_contam.llm import EndpointConfig
from lmms_contam.synthetic import reader
from lmms_contam.synthetic.chat_endpoint import ChatEndpoint, request_parts

MODEL = "synthetic-ideal-reader"
_TARGET = re.compile(r"What colou?r is the (\w+)\?")
_OPTION = re.compile(r"^([A-Z])\. (.+)$", re.MULTILINE)


def verdict(body: dict) -> dict:
    """The judge's reply to one chat-completions request: the correct option letters and why."""
    text, images = request_parts(body)
    target = _TARGET.search(text)
    options = _OPTION.findall(text)
    if len(images) != 1 or not target or not options:
        return {"correct_options": [], "reason": "no single image, target shape or lettered options in the prompt"}
    letters = [letter for letter, _ in options]
    if letters != option_letters(len(letters)):
        return {"correct_options": [], "reason": f"options are not lettered from A: {letters}"}
    correct = reader.correct_options(images[0], target.group(1), [text.strip() for _, text in options])
    reason = (f"the {target.group(1)} reads as {options[correct[0]][1].strip()}" if correct
              else f"no {target.group(1)} whose colour is within {reader.TOLERANCE:.0f} of an option")  # fmt: skip
    return {"correct_options": [letters[i] for i in correct], "reason": reason}


class IdealReaderJudge(ChatEndpoint):
    """A context manager serving `verdict` until it exits; `endpoint` is its judge endpoint setting."""

    def __init__(self) -> None:
        super().__init__(lambda body: json.dumps(verdict(body)), MODEL)

    @property
    def endpoint(self) -> EndpointConfig:
        return EndpointConfig(model=MODEL, base_url=self.base_url, api_key_env="LMMS_CONTAM_NO_KEY", max_retries=2,
                              timeout_s=30.0, concurrency=4)  # fmt: skip
