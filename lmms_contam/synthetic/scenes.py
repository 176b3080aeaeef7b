"""Procedural scenes for the controlled-contamination experiment.

Each scene is a 32x32 image on a 2x2 grid (one 16 px cell per image token of the tiny VLM) with one
target shape and one or two distractors on a background colour: together they make every image
individually recognisable. The question asks the target's colour, drawn with fixed per-item noise.
About a quarter of the items are ambiguous: their colour is mixed towards a partner option, so they
look like that option: items beyond any model's skill, which only memory answers right, as
ambiguous or mislabelled items in real benchmarks are. A counterfactual redraws the same scene with
another answer and the same noise, confusion and mix, so it keeps everything that makes the image
recognisable, changes only what decides the answer, and is exactly as readable as its original:
the noise and mix of every item are drawn so that the image reads the same way whatever the answer
(an ideal reader is right on a counterfactual exactly when it is right on the original).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image, ImageDraw

from lmms_contam.letters import option_letters
from lmms_contam.stats import stable_seed

SIZE = 32
CELL = 16
SHAPE = 14  # px: one shape fills most of a cell, so one image token sees it whole
AMBIGUOUS_SHARE = 0.27  # items beyond skill: the best accuracy from the image alone is 0.73
MIX = (0.6, 0.85)  # how far an ambiguous colour lies from its answer towards the partner option
CLEAR_NOISE = 40.0  # RGB standard deviation of a clear item's colour: varied, never nearer another option
AMBIGUOUS_NOISE = 15.0


@dataclass(frozen=True)
class QuestionKind:
    name: str
    target: str  # the shape the question is about
    palette: dict[str, tuple[int, int, int]]  # option text -> base colour, in the fixed option order
    distractor_shapes: tuple[str, ...]

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self.palette)


KINDS = {
    "circle": QuestionKind(
        name="circle",
        target="circle",
        palette={"red": (210, 50, 50), "green": (50, 170, 70), "blue": (50, 90, 210), "yellow": (220, 200, 50)},
        distractor_shapes=("square", "triangle"),
    ),
    "square": QuestionKind(
        name="square",
        target="square",
        palette={"orange": (235, 130, 30), "purple": (130, 50, 170), "cyan": (40, 200, 210), "pink": (240, 120, 180)},
        distractor_shapes=("circle", "triangle"),
    ),
}


@dataclass(frozen=True)
class Distractor:
    cell: int
    shape: str
    colour: tuple[int, int, int]


Colour = tuple[int, int, int]


@dataclass(frozen=True)
class Scene:
    kind: str  # the target's shape, which the question asks about: the item's category
    answer: int  # index into the options, as shown
    target_cell: int
    noise: tuple[float, float, float]  # fixed per item, added to the drawn colour
    background: Colour
    distractors: tuple[Distractor, ...]
    options: tuple[str, ...]  # the option texts, in the order the question shows them
    colours: tuple[Colour, ...]  # each option's base colour
    stem: str  # the question without its options
    confusion: int = 0  # 0: a clear item; k: mixed towards option (answer + k) mod 4
    mix: float = 0.0  # the weight of that partner option's colour

    @property
    def letter(self) -> str:
        return option_letters(4)[self.answer]

    def question_text(self) -> str:
        """MMStar's layout: the question, then the options inline."""
        listed = ", ".join(f"{letter}: {text}" for letter, text in zip(option_letters(4), self.options, strict=True))
        return f"{self.stem}\nOptions: {listed}"

    def target_colour(self, answer: int | None = None) -> np.ndarray:
        """The drawn colour, or the one this item would have with another answer."""
        answer = self.answer if answer is None else answer
        palette = [np.array(colour, dtype=float) for colour in self.colours]
        base = (1 - self.mix) * palette[answer] + self.mix * palette[(answer + self.confusion) % 4]
        return np.clip(np.round(base + np.array(self.noise)), 0, 255)

    def looks_like(self, answer: int | None = None) -> int:
        """The option whose base colour is nearest the drawn one: the best answer from the image alone."""
        drawn = self.target_colour(answer)
        return int(np.argmin([np.linalg.norm(drawn - np.array(c)) for c in self.colours]))

    def reads_the_same_for_every_answer(self) -> bool:
        """Clear for every answer, or like the same-offset partner for every answer."""
        return all(self.looks_like(answer) == (answer + self.confusion) % 4 for answer in range(4))


def _bright(rng: random.Random) -> Colour:
    return tuple(rng.randrange(60, 256) for _ in range(3))  # type: ignore[return-value]


@dataclass(frozen=True)
class Layout:
    """Where a scene's shapes stand and what surrounds the target: drawn before its colours."""

    target_cell: int
    distractors: tuple[Distractor, ...]
    background: Colour


def draw_layout(rng: random.Random, distractor_shapes: tuple[str, ...]) -> Layout:
    target_cell = rng.randrange(4)
    free = [cell for cell in range(4) if cell != target_cell]
    rng.shuffle(free)
    distractors = tuple(
        Distractor(cell, rng.choice(distractor_shapes), _bright(rng)) for cell in free[: rng.randint(1, 2)]
    )
    background = tuple(rng.randrange(0, 90) for _ in range(3))
    return Layout(target_cell, distractors, background)  # type: ignore[arg-type]


def readable_scene(rng: random.Random, unmixed: Scene) -> Scene:
    """`unmixed` made clear or ambiguous (AMBIGUOUS_SHARE), its noise and mix redrawn until the item reads the
    same whatever its answer (a few draws at most)."""
    confusion = rng.randrange(1, 4) if rng.random() < AMBIGUOUS_SHARE else 0
    sigma = AMBIGUOUS_NOISE if confusion else CLEAR_NOISE
    while True:
        mix = rng.uniform(*MIX) if confusion else 0.0
        noise = (rng.gauss(0, sigma), rng.gauss(0, sigma), rng.gauss(0, sigma))
        scene = replace(unmixed, noise=noise, confusion=confusion, mix=mix)
        if scene.reads_the_same_for_every_answer():
            return scene


def draw_scene(item_id: str, seed: int = 0, kind: str | None = None) -> Scene:
    """The scene of an item id, identical in every process (seeded from SHA-256 of the id): its kind's
    question, options in the kind's fixed order."""
    rng = random.Random(stable_seed("synthetic-scene", item_id, str(seed)))
    kind = kind or rng.choice(sorted(KINDS))
    answer = rng.randrange(4)
    layout = draw_layout(rng, KINDS[kind].distractor_shapes)
    unmixed = Scene(
        kind=kind,
        answer=answer,
        target_cell=layout.target_cell,
        noise=(0.0, 0.0, 0.0),
        background=layout.background,
        distractors=layout.distractors,
        options=KINDS[kind].options,
        colours=tuple(KINDS[kind].palette.values()),
        stem=f"What colour is the {KINDS[kind].target}?",
    )
    return readable_scene(rng, unmixed)


def counterfactual(scene: Scene, new_answer: int) -> Scene:
    """The same scene where `new_answer` is right: same place, noise, confusion, mix, background and distractors."""
    if new_answer == scene.answer or not 0 <= new_answer < 4:
        raise ValueError(f"new answer {new_answer} must be another option than {scene.answer}")
    return replace(scene, answer=new_answer)


def cell_origin(cell: int) -> tuple[int, int]:
    """The top-left pixel of a grid cell (cells 0 1 / 2 3)."""
    return cell % 2 * CELL, cell // 2 * CELL


def shape_box(cell: int) -> tuple[float, float, float, float]:
    """The bounding box (left, top, right, bottom, inclusive) of the shape drawn in a cell."""
    x, y = cell_origin(cell)
    margin = (CELL - SHAPE) / 2
    left, top = x + margin, y + margin
    return left, top, left + SHAPE - 1, top + SHAPE - 1


def _draw_shape(canvas: ImageDraw.ImageDraw, shape: str, cell: int, colour: tuple[int, ...]) -> None:
    left, top, right, bottom = shape_box(cell)
    if shape == "circle":
        canvas.ellipse((left, top, right, bottom), fill=colour)
    elif shape == "square":
        canvas.rectangle((left + 1, top + 1, right - 1, bottom - 1), fill=colour)
    elif shape == "triangle":
        canvas.polygon([((left + right) / 2, top), (right, bottom), (left, bottom)], fill=colour)
    else:
        raise ValueError(f"unknown shape {shape!r}")


def render(scene: Scene) -> Image.Image:
    image = Image.new("RGB", (SIZE, SIZE), scene.background)
    canvas = ImageDraw.Draw(image)
    for distractor in scene.distractors:
        _draw_shape(canvas, distractor.shape, distractor.cell, distractor.colour)
    _draw_shape(canvas, scene.kind, scene.target_cell, tuple(int(v) for v in scene.target_colour()))
    return image
