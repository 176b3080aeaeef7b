"""Flawed counterfactuals: the failures of a generated edit, drawn into the synthetic benchmark at a known rate.

A counterfactual whose image does not show its new answer is failed by a clean model, so an
unverified set can make a clean model look contaminated. Real edits fail in a few recognisable ways;
with probability `rate` per item the procedural editor draws one of them instead of the ideal
counterfactual. The paper gives no breakdown of its rejected edits, so the four kinds have equal
shares. Which items are flawed, and how, is nested across rates: an item flawed at 0.1 is flawed
the same way at 0.2 and 0.4, so the sets of a study differ only by the flaws added.
"""

from __future__ import annotations

import random
from dataclasses import replace

from PIL import Image, ImageDraw

from lmms_contam.stats import stable_seed
from lmms_contam.synthetic.scenes import CELL, Scene, cell_origin, counterfactual, render

FLAW_SHARES = {
    "unchanged": 0.25,  # the edit left the answer as it was: the original colour kept
    "third_option": 0.25,  # the edit produced a third option's colour
    "ambiguous": 0.25,  # the edit stopped halfway: a colour mixed evenly between the old and the new answer
    "removed": 0.25,  # the edit removed the target shape
}


def _uniform(*parts: str) -> float:
    return random.Random(stable_seed(*parts)).random()


def flaw_of(item_id: str, rate: float, seed: int = 0) -> str | None:
    """The item's flaw at this rate, or None for the ideal counterfactual."""
    if _uniform("flaw", item_id, str(seed)) >= rate:
        return None
    draw, cumulative = _uniform("flaw-kind", item_id, str(seed)), 0.0
    for kind, share in FLAW_SHARES.items():
        cumulative += share
        if draw < cumulative:
            return kind
    return kind  # rounding of the shares' sum


def flawed_image(scene: Scene, new_answer: int, kind: str, item_id: str, seed: int = 0) -> Image.Image:
    """The scene as an edit of kind `kind` leaves it, when `new_answer` was asked for."""
    if kind == "unchanged":
        return render(scene)
    if kind == "third_option":
        others = [option for option in range(4) if option not in (scene.answer, new_answer)]
        third = random.Random(stable_seed("flaw-third", item_id, str(seed))).choice(others)
        return render(counterfactual(scene, third))
    if kind == "ambiguous":
        return render(replace(scene, answer=new_answer, confusion=(scene.answer - new_answer) % 4, mix=0.5))
    if kind == "removed":
        image = render(scene)
        x, y = cell_origin(scene.target_cell)
        ImageDraw.Draw(image).rectangle((x, y, x + CELL - 1, y + CELL - 1), fill=scene.background)
        return image
    raise ValueError(f"unknown flaw kind {kind!r}; known: {', '.join(FLAW_SHARES)}")
