"""The procedural benchmarks: items, training data, and the perturbed set in the plugin's schema.

Two benchmarks draw their scenes alike (scenes.py): `synthetic`, one wording and one option order per kind
(the demo's, fast to learn), and `synthetic_varied` (varied.py), whose items vary their options, order and
wording as real questions do (the detector race's). The test set goes through the same stages as a real
benchmark (answer swap, then an editor behind the `Editor` interface), so the plugin's tasks, statistics and
report run on it unchanged. Test, training and control items draw their scenes from disjoint id namespaces.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.items import Item, Skipped
from lmms_contam.letters import option_letters
from lmms_contam.perturb.edit import EditRequest
from lmms_contam.perturb.swap import swap_answer
from lmms_contam.schema import SCHEMA_VERSION, manifest_beside, write_parquet
from lmms_contam.synthetic import flaws
from lmms_contam.synthetic.scenes import Scene, counterfactual, draw_scene, render
from lmms_contam.synthetic.varied import draw_varied_scene


@dataclass(frozen=True)
class Procedural:
    """A procedural benchmark: its name (and its test ids' prefix) and how an item id becomes a scene."""

    name: str
    draw: Callable[[str, int], Scene]


FIXED = Procedural("synthetic", draw_scene)
VARIED = Procedural("synthetic_varied", draw_varied_scene)


@dataclass(frozen=True)
class Example:
    """An image, its question and the answer a model is trained or scored on: a letter, or (with `asked`, the text
    exactly as asked in place of a harness's multiple-choice prompt) any text."""

    image: Image.Image
    question: str
    answer: str
    asked: str = ""
    learn_prompt: bool = False  # the loss covers the prompt's text too (a document read in pre-training)


def example(scene: Scene) -> Example:
    return Example(render(scene), scene.question_text(), scene.letter)


def scenes(prefix: str, count: int, seed: int, start: int = 0, of: Procedural = FIXED) -> list[tuple[str, Scene]]:
    ids = [f"{prefix}-{i:06d}" for i in range(start, start + count)]
    return [(item_id, of.draw(item_id, seed)) for item_id in ids]


def test_scenes(count: int, seed: int = 0, of: Procedural = FIXED) -> list[tuple[str, Scene]]:
    return scenes(of.name, count, seed, of=of)


def training_batches(seed: int, batch_size: int, of: Procedural = FIXED) -> Iterator[list[Example]]:
    """Fresh training scenes for every batch, never a test id: the clean model's data."""
    start = 0
    while True:
        yield [example(scene) for _, scene in scenes(f"train{seed}", batch_size, seed, start, of)]
        start += batch_size


def control_examples(count: int, seed: int, of: Procedural = FIXED) -> list[Example]:
    """As many fresh non-test items as the test set: what the control model is fine-tuned on."""
    return [example(scene) for _, scene in scenes(f"control{seed}", count, seed, of=of)]


def to_item(item_id: str, scene: Scene, of: Procedural = FIXED) -> Item:
    return Item(
        benchmark=of.name,
        original_id=item_id,
        question=scene.question_text(),
        options=scene.options,
        answer=scene.letter,
        image=render(scene),
        extra={"category": scene.kind, "l2_category": scene.kind},
    )


def swapped_answer(item: Item, seed: int) -> int:
    """The counterfactual's answer index, from the pipeline's own answer swap."""
    new_answer = swap_answer(item, seed)
    if isinstance(new_answer, Skipped):  # four options always: a skip here is a bug
        raise RuntimeError(f"{item.original_id}: {new_answer.reason}")
    return option_letters(4).index(new_answer)


class ProceduralEditor:
    """Redraws a known scene so that the option named by the caption is right; the layout stays.

    The ideal counterfactual: it separates the detector's validity from diffusion quality. With a
    `flaw_rate`, that share of the items get one of the flaws in `flaws.py` instead, recorded in
    `self.flaws` (item key -> kind) for the analysis alone.
    """

    def __init__(self, scenes_by_key: Mapping[str, Scene], flaw_rate: float = 0.0, flaw_seed: int = 0) -> None:
        if not 0 <= flaw_rate <= 1:
            raise ValueError(f"flaw rate must lie between 0 and 1, got {flaw_rate}")
        self.scenes = scenes_by_key
        self.flaw_rate = flaw_rate
        self.flaw_seed = flaw_seed
        self.flaws: dict[str, str] = {}

    def describe(self) -> dict:
        described = {"editor": "procedural", "scenes": len(self.scenes)}
        if self.flaw_rate:
            described |= {"flaw_rate": self.flaw_rate, "flaw_seed": self.flaw_seed, "flaw_shares": flaws.FLAW_SHARES}
        return described

    def edit(self, requests: Sequence[EditRequest]) -> list[Image.Image]:
        images = []
        for request in requests:
            if request.key not in self.scenes:
                raise KeyError(f"procedural editor: no scene for item {request.key!r}")
            scene = self.scenes[request.key]
            options = scene.options
            if request.caption not in options:
                raise ValueError(f"procedural editor: caption {request.caption!r} is not one of {options}")
            new_answer = options.index(request.caption)
            flaw = flaws.flaw_of(request.key, self.flaw_rate, self.flaw_seed)
            if flaw is None:
                images.append(render(counterfactual(scene, new_answer)))
            else:
                self.flaws[request.key] = flaw
                images.append(flaws.flawed_image(scene, new_answer, flaw, request.key, self.flaw_seed))
        return images


def flaws_path(test_set: Path) -> Path:
    """Which items of a set are flawed, and how: beside the set, read by the flaw study alone."""
    return test_set.with_name(test_set.stem + ".flaws.json")


def build_test_set(count: int, out: str | Path, seed: int = 0, flaw_rate: float = 0.0, of: Procedural = FIXED) -> Path:
    """Write `count` items with their counterfactuals as a perturbed set (parquet, schema v1); with a
    `flaw_rate`, that share of the counterfactuals is flawed (kinds in `<stem>.flaws.json`)."""
    drawn = test_scenes(count, seed, of)
    editor = ProceduralEditor(dict(drawn), flaw_rate)
    rows = []
    for item_id, scene in tqdm(drawn, desc=f"{of.name} benchmark", disable=count < 500):
        item = to_item(item_id, scene, of)
        new_index = swapped_answer(item, seed)
        new_answer = option_letters(4)[new_index]
        request = EditRequest(key=item_id, image=item.image, caption=item.options[new_index], seed=seed)
        (edited,) = editor.edit([request])
        rows.append(
            {
                "item_id": item_id,
                "original_id": item_id,
                "benchmark": of.name,
                "question": item.question,
                "options": list(item.options),
                "original_answer": item.answer,
                "new_answer": new_answer,
                "original_image": item.image,
                "image": edited,
                "provenance": json.dumps({"generator": "lmms_contam.synthetic", "seed": seed, **editor.describe()}),
                "schema_version": SCHEMA_VERSION,
                **item.extra,
            }
        )
    out = Path(out)
    if flaw_rate:  # written before the set, so a set never stands without its flaw record
        record = {"flaw_rate": flaw_rate, "shares": flaws.FLAW_SHARES, "items": editor.flaws}
        with atomic_path(flaws_path(out)) as tmp:
            tmp.write_text(json.dumps(record, indent=2) + "\n")
    written = write_parquet(rows, of.name, out)
    verification = (
        {
            "verified": False,
            "kept": None,
            "of": count,
            "by": f"nobody: {flaw_rate:.0%} of the counterfactuals are flawed on purpose (the flaw study)",
        }
        if flaw_rate
        else {
            "verified": True,
            "kept": count,
            "of": count,
            "by": "construction (the procedural editor draws the ideal counterfactual)",
        }
    )
    manifest = {
        "kind": f"lmms-contam {of.name}",
        "items": count,
        "seed": seed,
        "flaw_rate": flaw_rate,
        "verification": verification,
    }
    with atomic_path(manifest_beside(written)) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    return written


def original_examples(count: int, seed: int = 0, of: Procedural = FIXED) -> list[Example]:
    """The test items as a contaminated training set would hold them: original image, original gold."""
    return [example(scene) for _, scene in test_scenes(count, seed, of)]


def perturbed_examples(count: int, seed: int = 0, of: Procedural = FIXED) -> list[Example]:
    """The counterfactuals exactly as `build_test_set` writes them (same swap, same editor)."""
    out = []
    for item_id, scene in test_scenes(count, seed, of):
        out.append(example(counterfactual(scene, swapped_answer(to_item(item_id, scene, of), seed))))
    return out
