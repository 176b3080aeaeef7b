"""Scripted vision-language models behind a real OpenAI-compatible server on 127.0.0.1, for both hosts.

The server sees what a harness sends (its own prompt, the image it re-encoded) and must answer as a model
that knows the items would: it finds which version of which item it is asked (every option text shown, in
the order shown, and the nearest image by a small grey thumbnail) and replies by the policy the request's
model name picks. lmms-eval (`--model openai`) and VLMEvalKit (`--base-url`) ask the same server.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from PIL import Image

from helpers.loopback import Reply, completion
from lmms_contam.letters import option_letters
from lmms_contam.stats import stable_seed


def thumbnail(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data)).convert("L").resize((16, 16), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=float) / 255.0


@dataclass(frozen=True)
class Shown:
    """One version of one item as a harness shows it."""

    item_id: str
    variant: str
    options: tuple[str, ...]  # in the order shown
    gold: str  # the letter that is right as shown
    original_gold: str  # the original version's gold letter: what a memoriser of answers replies
    image: np.ndarray | None  # its thumbnail; None when the image is withheld
    view: str  # what the model sees (options in order, image bytes): two versions that look alike are one view

    @property
    def letters(self) -> list[str]:
        return option_letters(len(self.options))


def view_of(options: tuple[str, ...], image: bytes | None) -> str:
    return hashlib.sha256("\x1f".join(options).encode() + (image or b"")).hexdigest()[:16]


def shown_in_export(tsv: pd.DataFrame, original_gold: dict[str, str]) -> list[Shown]:
    """Every row of an exported VLMEvalKit TSV (read with dtype=str)."""
    shown = []
    for row in tsv.to_dict("records"):
        options = tuple(row[letter] for letter in option_letters(26) if row.get(letter))
        data = base64.b64decode(row["image"]) if row.get("image") else None
        shown.append(Shown(row["contam_item_id"], row["contam_variant"], options, row["answer"],
                           original_gold[row["contam_item_id"]], thumbnail(data) if data else None,
                           view_of(options, data)))  # fmt: skip
    return shown


def shown_in_set(rows: list[dict]) -> list[Shown]:
    """Both versions of every row of a perturbed set, options in their own order."""
    return [
        Shown(
            row["item_id"],
            variant,
            tuple(row["options"]),
            gold,
            row["original_answer"],
            thumbnail(row[column]["bytes"]),
            view_of(tuple(row["options"]), row[column]["bytes"]),
        )
        for row in rows
        for variant, gold, column in (
            ("original", row["original_answer"], "original_image"),
            ("perturbed", row["new_answer"], "image"),
        )  # fmt: skip
    ]


def _in_order(prompt: str, options: tuple[str, ...]) -> bool:
    position = 0
    for text in options:
        found = prompt.find(text, position)
        if found < 0:
            return False
        position = found + len(text)
    return True


def _request(body: dict) -> tuple[str, bytes | None]:
    """The prompt text and the first image of a chat request."""
    texts, image = [], None
    for message in body["messages"]:
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts:
            if part["type"] == "text":
                texts.append(part["text"])
            elif part["type"] == "image_url" and image is None:
                image = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    return "\n".join(texts), image


def seeded_letter(shown: Shown, *salt: str) -> str:
    """A letter drawn from what the model sees: the same view gets the same letter, whichever task shows it."""
    return shown.letters[stable_seed(shown.view, *salt) % len(shown.letters)]


POLICIES: dict[str, Callable[[Shown], str]] = {
    "oracle": lambda s: s.gold,
    "memoriser": lambda s: s.original_gold,
    "wrong": lambda s: next(letter for letter in s.letters if letter != s.gold),
    "random": lambda s: seeded_letter(s, "random"),
}


def messy_formats(letter: str, text: str) -> list[str]:
    """A reply naming `letter` (or its option's `text`) in the ways real models write one, and replies naming
    none."""
    return [letter, f"{letter}.", f"({letter})", letter.lower(), f"The answer is {letter}.", f"Answer: {letter}",
            f"**{letter}**", f"{letter}. {text}", f"{letter}: {text}", text, f"I think the answer is {letter}",
            "", "I am not sure.", f" {letter} "]  # fmt: skip


def messy_replies(shown: list[Shown]) -> dict[str, str]:
    """Per view, a reply in one of the messy formats, taken in turn so that each is used, and on the second
    round with the other letter: right, then wrong (or wrong, then right)."""
    replies: dict[str, str] = {}
    for s in shown:
        if s.view not in replies:
            turn, kinds = len(replies), len(messy_formats("A", ""))
            right = (turn + turn // kinds) % 2 == 0
            letter = s.gold if right else next(x for x in s.letters if x != s.gold)
            replies[s.view] = messy_formats(letter, s.options[s.letters.index(letter)])[turn % kinds]
    return replies


class ScriptedVLM:
    """The server's script: `policies[model name](shown version)` is the reply; `asked` counts the requests per
    (model, view)."""

    def __init__(self, shown: list[Shown], policies: dict[str, Callable[[Shown], str]] | None = None) -> None:
        self.shown = shown
        messy = messy_replies(shown)
        self.policies = {**POLICIES, "messy": lambda s: messy[s.view], **(policies or {})}
        self.asked: Counter = Counter()

    def find(self, prompt: str, image: bytes | None) -> Shown:
        candidates = [s for s in self.shown if _in_order(prompt, s.options) and (s.image is None) == (image is None)]
        longest = max((len("".join(s.options)) for s in candidates), default=0)
        candidates = [s for s in candidates if len("".join(s.options)) == longest]  # "object 1" is in "object 10"
        if not candidates:
            raise LookupError(f"no version of any item is shown by this prompt: {prompt[:300]!r}")
        if image is None:
            return candidates[0]
        look = thumbnail(image)
        return min(candidates, key=lambda s: float(np.abs(s.image - look).mean()))

    def __call__(self, body: dict, _number: int) -> Reply:
        prompt, image = _request(body)
        shown = self.find(prompt, image)
        self.asked[(body["model"], shown.view)] += 1
        return 200, completion(self.policies[body["model"]](shown)), 0.0


def shown_in_versions(benchmark: str, family: str, rows: list[dict]) -> list[Shown]:
    """Every version a task of `family` asks of the set's rows (the plugin's own versions, as a host without an
    export file of its own shows them: inspect-ai's tasks)."""
    from lmms_contam.versions import NO_IMAGE, item_versions

    shown = []
    for row in rows:
        for version in item_versions(benchmark, family, row):
            options = tuple(row["options"][i] for i in version.order) if version.order else tuple(row["options"])
            data = None if version.image is NO_IMAGE else row[version.image]["bytes"]
            shown.append(Shown(row["item_id"], version.variant, options, version.gold, row["original_answer"],
                               None if data is None else thumbnail(data), view_of(options, data)))  # fmt: skip
    return shown
