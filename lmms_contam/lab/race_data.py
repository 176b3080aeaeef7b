"""What the detector race's models learn from: the clean model's fresh items, and each kind of contamination.

Every example is drawn from the varied benchmark (synthetic/varied.py) and asked as lmms-eval asks it: the
multiple-choice questions with MMStar's prompt, the masked-option questions as the `*_masked_option` tasks ask
them. The clean model learns the benchmark's skills on items it is never tested on: answering the questions,
naming a target's colour, and the masked-option format (whose answers, drawn uniformly, teach it nothing but
the names). Each kind of contamination is what a leak of the test items would put in a model's training data.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from PIL import Image

from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.masked_option import INSTRUCTION, hidden_option
from lmms_contam.detectors.options import shown_masked
from lmms_contam.imaging import BLANK_GREY
from lmms_contam.synthetic.benchmark import VARIED, Example, example, scenes, test_scenes
from lmms_contam.synthetic.scenes import SIZE, Scene, render
from lmms_contam.synthetic.varied import COLOURS, CORNERS, TARGETS, colour_of

NAMING = "What colour is the {target}? Answer with the colour's name."
DESCRIBE = "Describe the picture."
# Kinds of contamination: what the leaked copy of the test items holds (the race's models are fine-tuned on it).
KINDS = {
    "image_question_answer": "image, question and answer letter (the paper's contamination; answer-only loss)",
    "text_only": "question, options and answer without the image, read as a document (loss on every text token)",
    "image_only": "the test images with captions naming the target's colour, no questions",
    "fixed_order": "image, question and answer letter with the options in one fixed order (alphabetical)",
}
CLEAN = "clean"  # the model every other is fine-tuned from
CONTROL = "control"  # the first kind's fine-tuning on as many fresh items


def _masked(item_id: str, scene: Scene) -> tuple[str, str, str]:
    """(the question with its hidden option masked, that question as the masked-option task asks it, the text)."""
    hidden = hidden_option(AskedItem(item_id, scene.options, scene.answer))
    shown = shown_masked(VARIED.name, item_id, scene.question_text(), list(scene.options), hidden)
    return shown["question"], shown["question"] + INSTRUCTION, scene.options[hidden]


def masked_example(item_id: str, scene: Scene) -> Example:
    """The item asked as `synthetic_varied_masked_option` asks it; the answer is the hidden option's text."""
    question, asked, hidden_text = _masked(item_id, scene)
    return Example(render(scene), question, hidden_text, asked=asked)


def naming_example(scene: Scene) -> Example:
    """The target's colour by the first of its names: the skill of reading the image, without options."""
    name = COLOURS[colour_of(scene.options[scene.answer])][1][0]
    question = NAMING.format(target=scene.kind)
    return Example(render(scene), question, name, asked=question)


def _fresh(namespace: str, batch_size: int, seed: int) -> Iterator[list[tuple[str, Scene]]]:
    """Batches of items never drawn before in `namespace` (never a test id)."""
    start = 0
    while True:
        yield scenes(namespace, batch_size, seed, start, VARIED)
        start += batch_size


def clean_batches(seed: int, batch_size: int) -> Iterator[list[Example]]:
    """Fresh items every batch: half multiple-choice questions, a quarter naming, a quarter masked options."""
    half, three_quarters = batch_size // 2, 3 * batch_size // 4
    for drawn in _fresh(f"race-train{seed}", batch_size, seed):
        batch = [example(scene) for _, scene in drawn[:half]]
        batch += [naming_example(scene) for _, scene in drawn[half:three_quarters]]
        batch += [masked_example(item_id, scene) for item_id, scene in drawn[three_quarters:]]
        yield batch


def reading_batches(seed: int, batch_size: int) -> Iterator[list[tuple[Example, Scene]]]:
    """Fresh items, each with its scene, for the clean model's reading stage (scene_reading.py): two thirds
    multiple-choice questions, a third naming."""
    questions = 2 * batch_size // 3
    for drawn in _fresh(f"race-read{seed}", batch_size, seed):
        yield [(example(scene), scene) for _, scene in drawn[:questions]] + [
            (naming_example(scene), scene) for _, scene in drawn[questions:]
        ]


def alignment_scenes(seed: int, batch_size: int) -> Iterator[list[Scene]]:
    """Fresh scenes for aligning the vision side to the scene vectors."""
    for drawn in _fresh(f"race-align{seed}", batch_size, seed):
        yield [scene for _, scene in drawn]


def _caption(scene: Scene) -> str:
    neighbour = scene.distractors[0].shape
    return f"A {scene.options[scene.answer]} {scene.kind} in the {CORNERS[scene.target_cell]}, with a {neighbour}."


def _in_fixed_order(scene: Scene) -> Scene:
    order = sorted(range(4), key=lambda i: scene.options[i])
    return replace(
        scene,
        options=tuple(scene.options[i] for i in order),
        colours=tuple(scene.colours[i] for i in order),
        answer=order.index(scene.answer),
    )


def contamination(kind: str, count: int, seed: int) -> list[Example]:
    """The leaked copy of the first `count` test items that a model of `kind` is fine-tuned on (the control:
    as many fresh items, asked as the first kind asks them)."""
    if kind == CONTROL:
        return [example(scene) for _, scene in scenes(f"race-control{seed}", count, seed, of=VARIED)]
    drawn = [scene for _, scene in test_scenes(count, of=VARIED)]
    if kind == "image_question_answer":
        return [example(scene) for scene in drawn]
    if kind == "text_only":
        blank = Image.new("RGB", (SIZE, SIZE), BLANK_GREY)  # as the text-only tasks withhold the image
        return [Example(blank, scene.question_text(), scene.letter, learn_prompt=True) for scene in drawn]
    if kind == "image_only":
        return [Example(render(scene), DESCRIBE, _caption(scene), asked=DESCRIBE) for scene in drawn]
    if kind == "fixed_order":
        return [example(_in_fixed_order(scene)) for scene in drawn]
    raise ValueError(f"unknown kind of contamination {kind!r}; known: {', '.join([*KINDS, CONTROL])}")


def vocabulary() -> list[str]:
    """The texts the race's models read and write, as lmms-eval sends them (before the chat template): what
    their tokenizer learns its merges from."""
    from lmms_contam.lab.train import host_text  # torch: imported where a model is made, not with the table

    drawn = scenes("race-vocabulary", 3000, 0, of=VARIED)
    texts = [host_text(scene.question_text()) for _, scene in drawn]
    texts += [_masked(item_id, scene)[1] for item_id, scene in drawn[:1000]]
    texts += [DESCRIBE, *(NAMING.format(target=target) for target in TARGETS)]
    texts += [_caption(scene) for _, scene in drawn[:500]]
    return [*texts, *(name for _, names in COLOURS.values() for name in names)]
