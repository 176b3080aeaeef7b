"""The ideal reader served as an OpenAI-compatible chat endpoint on 127.0.0.1, with or without known errors.

`lmms-contam verify` then runs on a synthetic set exactly as on a real one with a model endpoint:
the same prompt, client, stored verdicts, drift check and kept subset; only the model differs. The
server reads what any judge model reads (the image, the question and the lettered options from the
prompt) and replies in the verification judge's JSON format.

A judge with known errors (the judge-quality study) is the ideal reader that, on a seeded draw per
item, keeps a flawed counterfactual (names its new answer as the one right option) or rejects a good
one (names none). It knows each counterfactual's truth from the set it judges (its flaw record), looked
up by the image's pixels, which is all a request carries of the item.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

from lmms_contam.lab import ideal_reader
from lmms_contam.lab.chat_endpoint import ChatEndpoint, request_parts
from lmms_contam.letters import option_letters
from lmms_contam.llm import EndpointConfig
from lmms_contam.stats import stable_seed
from lmms_contam.synthetic import benchmark

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
    correct = ideal_reader.correct_options(images[0], target.group(1), [text.strip() for _, text in options])
    reason = (
        f"the {target.group(1)} reads as {options[correct[0]][1].strip()}"
        if correct
        else f"no {target.group(1)} whose colour is within {ideal_reader.TOLERANCE:.0f} of an option"
    )
    return {"correct_options": [letters[i] for i in correct], "reason": reason}


@dataclass(frozen=True)
class JudgeErrors:
    """A judge's two errors, as rates per item. The draws are nested: a judge with a larger rate errs on every
    item a smaller one errs on, so the study's curves compare like with like."""

    keep_flawed: float = 0.0  # keeps a flawed counterfactual: names its new answer as the one right option
    reject_good: float = 0.0  # rejects a good counterfactual: names no option
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("keep_flawed", "reject_good"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a rate in [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class Truth:
    item_id: str
    new_letter: str
    flawed: bool


def pixel_digest(image: Image.Image) -> str:
    """The image's identity as a judge receives it (PNG in a data URI: the pixels survive, the bytes may not)."""
    pixels = np.asarray(image.convert("RGB"))
    return hashlib.sha256(repr(pixels.shape).encode() + pixels.tobytes()).hexdigest()


def truths_of(data: Path) -> dict[str, Truth]:
    """Each counterfactual of a synthetic set by its pixels: its item, new answer, and whether it is flawed."""
    record = benchmark.flaws_path(data)
    flawed = json.loads(record.read_text())["items"] if record.is_file() else {}
    table = pq.read_table(data, columns=["item_id", "new_answer", "image"]).to_pylist()
    return {
        pixel_digest(Image.open(io.BytesIO(row["image"]["bytes"]))): Truth(
            row["item_id"], row["new_answer"], row["item_id"] in flawed
        )
        for row in table
    }


def calibration_truths(items: list) -> dict[str, Truth]:
    """The truths of `verify --calibrate`'s items (calibration.CalibrationItem), so an erring judge can be
    calibrated too."""
    return {pixel_digest(e.image()): Truth(e.key, e.new_letter, e.flaw is not None) for e in items}


def erring_verdict(body: dict, errors: JudgeErrors, truths: dict[str, Truth]) -> dict:
    """The ideal reader's verdict, turned by the item's draw into one of the judge's two errors."""
    ideal = verdict(body)
    _, images = request_parts(body)
    truth = truths.get(pixel_digest(images[0])) if len(images) == 1 else None
    if truth is None:
        raise ValueError("an image that is none of the judged set's counterfactuals")
    draw = random.Random(stable_seed("judge-error", truth.item_id, str(errors.seed))).random()
    if truth.flawed and draw < errors.keep_flawed:
        return {"correct_options": [truth.new_letter], "reason": "the edit reads as the new answer (a judge error)"}
    if not truth.flawed and draw < errors.reject_good:
        return {"correct_options": [], "reason": "no option is clearly right (a judge error)"}
    return ideal


class IdealReaderJudge(ChatEndpoint):
    """A context manager serving `verdict` (or, given errors and the set's truths, `erring_verdict`) until it
    exits; `endpoint` is its judge endpoint setting."""

    def __init__(self, errors: JudgeErrors | None = None, truths: dict[str, Truth] | None = None) -> None:
        if errors is None:
            super().__init__(lambda body: json.dumps(verdict(body)), MODEL)
        else:
            super().__init__(lambda body: json.dumps(erring_verdict(body, errors, truths or {})), MODEL)

    @property
    def endpoint(self) -> EndpointConfig:
        return EndpointConfig(
            model=MODEL,
            base_url=self.base_url,
            api_key_env="LMMS_CONTAM_NO_KEY",
            max_retries=2,
            timeout_s=30.0,
            concurrency=4,
        )
