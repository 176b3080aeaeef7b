"""The varied procedural benchmark: scenes as in scenes.py, asked the way real benchmark questions are asked.

Where the fixed benchmark lists one kind's four colours in one order under one wording (so a model can learn
colour -> letter, and no question can be remembered without its image), each item here draws its own: four of
eight colours in a seeded order, each under one of its names, and a wording of its own that names the target's
corner or a neighbour. The letter of an answer then says nothing without reading the options, and the text of
an item (wording, options, order) is nearly unique, so it can be remembered without the image, as real
benchmark questions can. Everything else holds as in scenes.py: the same share of ambiguous items, ideal
counterfactuals, and an image that reads the same way whatever its answer.

A hidden wrong option is one of the colours not shown under one of its names, uniformly: a model that never
saw the item names it exactly with probability 1 / MASKED_CANDIDATES at best (the masked-option detector's
reference by construction).
"""

from __future__ import annotations

import random

from lmms_contam.stats import stable_seed
from lmms_contam.synthetic.scenes import Colour, Scene, draw_layout, readable_scene

# Base colours as in scenes.KINDS, each under two names.
COLOURS: dict[str, tuple[Colour, tuple[str, str]]] = {
    "red": ((210, 50, 50), ("red", "crimson")),
    "green": ((50, 170, 70), ("green", "emerald")),
    "blue": ((50, 90, 210), ("blue", "cobalt")),
    "yellow": ((220, 200, 50), ("yellow", "lemon")),
    "orange": ((235, 130, 30), ("orange", "amber")),
    "purple": ((130, 50, 170), ("purple", "violet")),
    "cyan": ((40, 200, 210), ("cyan", "turquoise")),
    "pink": ((240, 120, 180), ("pink", "rose")),
}
TARGETS = {"circle": ("square", "triangle"), "square": ("circle", "triangle")}  # target -> distractor shapes
CORNERS = ("top left", "top right", "bottom left", "bottom right")  # by grid cell
WORDINGS = (
    "What colour is the {target}?",
    "Which colour is the {target} in the {corner}?",
    "What is the colour of the {target} next to the {neighbour}?",
    "The {target} sits in the {corner} of the picture. What colour is it?",
    "Look at the {target}. Which of these colours does it have?",
    "Name the colour of the {target} shown with a {neighbour}.",
)
NAMES_PER_COLOUR = 2
# A hidden wrong option: one of the colours the three shown options leave, under one of its names.
MASKED_CANDIDATES = (len(COLOURS) - 3) * NAMES_PER_COLOUR


def draw_varied_scene(item_id: str, seed: int = 0) -> Scene:
    """The varied scene of an item id, identical in every process (seeded from SHA-256 of the id)."""
    rng = random.Random(stable_seed("synthetic-varied-scene", item_id, str(seed)))
    target = rng.choice(sorted(TARGETS))
    colours = rng.sample(sorted(COLOURS), 4)  # in the order shown
    names = tuple(rng.choice(COLOURS[colour][1]) for colour in colours)
    answer = rng.randrange(4)
    layout = draw_layout(rng, TARGETS[target])
    stem = rng.choice(WORDINGS).format(
        target=target, corner=CORNERS[layout.target_cell], neighbour=layout.distractors[0].shape
    )
    unmixed = Scene(
        kind=target,
        answer=answer,
        target_cell=layout.target_cell,
        noise=(0.0, 0.0, 0.0),
        background=layout.background,
        distractors=layout.distractors,
        options=names,
        colours=tuple(COLOURS[colour][0] for colour in colours),
        stem=stem,
    )
    return readable_scene(rng, unmixed)


def colour_of(name: str) -> str:
    """The base colour an option text names."""
    for colour, (_, names) in COLOURS.items():
        if name in names:
            return colour
    raise ValueError(f"{name!r} names none of the varied benchmark's colours")
