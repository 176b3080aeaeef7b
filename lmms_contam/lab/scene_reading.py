"""The race's clean model trained in stages, as LLaVA is, because trained on images from scratch it never reads
the options.

On images from the first step (every mixture, schedule and size of issue 44's probes) the tiny model stays at
chance on varied items: it has to find the target's colour in the image and the option that names it at once,
and neither pays before the other works. LLaVA's recipe splits them, a language model first, then a vision side
aligned to it; so here:

1. Reading: the language model learns the questions with each scene given as vectors in place of its image
   tokens, one per grid cell (an embedding of the shape there, or of none, plus a small MLP of its colour). An
   answer letter is learnt as a choice among the four letters (the full vocabulary's cross-entropy slowed that
   choice about threefold in the probes).
2. Alignment: the vision tower and projector learn to produce those vectors from the rendered image (mean squared
   error, the language model untouched): LLaVA's projector pre-training.
3. Tuning: the whole model on images (train.fit), the masked-option format among its tasks.

The scene vectors are a training aid only: the saved model is a plain LLaVA that reads images. In a throw-away
probe of this recipe (issue 44; constant learning rates) 3500 reading steps gave 0.91 of held-out clear items
right with the scenes as vectors, 300 alignment steps the same from the images, and 500 tuning steps 0.91 with all
four rotations right on 0.84; the race's own clean model (4000 reading steps) 0.865 and 0.735 on the test's clear
items (docs/results/detectors.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn
from torch.nn import functional

from lmms_contam.lab import train
from lmms_contam.synthetic.benchmark import Example
from lmms_contam.synthetic.scenes import Colour, Scene, render

SHAPES = ("none", "circle", "square", "triangle")
VISION = ("model.vision_tower.", "model.multi_modal_projector.")  # parameter names of the vision side
CELLS = 4  # grid cells, one image token each, in the image tokens' (row-major) order


def cell_contents(scene: Scene) -> list[tuple[str, Colour]]:
    """What each grid cell shows: its shape (or none) and colour (the background's where empty)."""
    cells: list[tuple[str, Colour]] = [("none", scene.background)] * CELLS
    for distractor in scene.distractors:
        cells[distractor.cell] = (distractor.shape, distractor.colour)
    target = tuple(int(v) for v in scene.target_colour())
    cells[scene.target_cell] = (scene.kind, target)  # type: ignore[assignment]
    return cells


class SceneVectors(nn.Module):
    """One vector per grid cell: the shape's embedding plus an MLP of the colour, in the text model's width."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.shape = nn.Embedding(len(SHAPES), width)
        self.colour = nn.Sequential(nn.Linear(3, width), nn.GELU(), nn.Linear(width, width))

    def forward(self, scenes: Sequence[Scene]) -> torch.Tensor:
        cells = [cell_contents(scene) for scene in scenes]
        shapes = torch.tensor([[SHAPES.index(shape) for shape, _ in row] for row in cells])
        colours = torch.tensor([[colour for _, colour in row] for row in cells], dtype=torch.float) / 255 - 0.5
        return self.shape(shapes) + self.colour(colours)


def choice_loss(logits: torch.Tensor, labels: torch.Tensor, letter_ids: Sequence[int]) -> torch.Tensor:
    """Next-token cross-entropy, an answer letter's taken among the letters alone."""
    logits, targets = logits[:, :-1], labels[:, 1:]
    letters = torch.tensor(list(letter_ids))
    is_letter = torch.isin(targets, letters)
    other = (targets != train.IGNORE) & ~is_letter
    choice = (targets[is_letter].unsqueeze(-1) == letters).int().argmax(dim=-1)
    total = functional.cross_entropy(logits[is_letter][:, letters], choice, reduction="sum")
    total = total + functional.cross_entropy(logits[other], targets[other], reduction="sum")
    return total / (targets != train.IGNORE).sum()


def embeds_reading_scenes(vlm: nn.Module, input_ids: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """The prompt's token embeddings with each image's tokens replaced by its scene's cell vectors."""
    image_token = vlm.config.image_token_id
    if int((input_ids == image_token).sum()) != vectors.shape[0] * CELLS:
        raise ValueError(f"each prompt must hold {CELLS} image tokens, one per grid cell")
    embeds = vlm.get_input_embeddings()(input_ids)
    return embeds.masked_scatter((input_ids == image_token).unsqueeze(-1), vectors.to(embeds.dtype))


def read_scenes(
    vlm: nn.Module,
    batcher: train.Batcher,
    vectors: SceneVectors,
    batches: Iterator[list[tuple[Example, Scene]]],
    steps: int,
    schedule: train.Schedule,
) -> None:
    """Stage 1: the language model and the scene vectors learn the questions; the vision side is left alone."""
    language = [p for name, p in vlm.named_parameters() if not name.startswith(VISION)]
    letter_ids = list(batcher.letter_ids.values())

    def step_loss() -> torch.Tensor:
        pairs = next(batches)
        batch = batcher.training_batch([example for example, _ in pairs])
        embeds = embeds_reading_scenes(vlm, batch["input_ids"], vectors([scene for _, scene in pairs]))
        logits = vlm(inputs_embeds=embeds, attention_mask=batch["attention_mask"]).logits
        return choice_loss(logits, batch["labels"], letter_ids)

    parameters = [*language, *vectors.parameters()]
    train.optimise([vlm, vectors], parameters, step_loss, steps, schedule, desc="race: clean model reads scenes")


def image_features(vlm: nn.Module, pixels: torch.Tensor) -> torch.Tensor:
    """(images, cells, width): what the vision side puts where the image tokens stand (transformers 4 returns the
    features, 5 an output whose pooler_output lists them per image; pyproject allows both)."""
    out = vlm.model.get_image_features(
        pixel_values=pixels, vision_feature_layer=-1, vision_feature_select_strategy="default"
    )
    features = getattr(out, "pooler_output", out)
    return torch.stack(list(features)) if isinstance(features, list | tuple) else features


def alignment_error(
    vlm: nn.Module, batcher: train.Batcher, vectors: SceneVectors, scenes: Sequence[Scene]
) -> torch.Tensor:
    """Mean squared distance of the image features from the scene vectors, relative to the vectors' mean square."""
    with torch.no_grad():
        target = vectors(scenes)
    features = image_features(vlm, batcher.pixels([render(scene) for scene in scenes]))
    return functional.mse_loss(features, target) / target.pow(2).mean()


def align_vision(
    vlm: nn.Module,
    batcher: train.Batcher,
    vectors: SceneVectors,
    scenes: Iterator[list[Scene]],
    steps: int,
    schedule: train.Schedule,
) -> None:
    """Stage 2: the vision tower and projector learn to see each cell as its scene vector."""
    vision = [p for name, p in vlm.named_parameters() if name.startswith(VISION)]
    vectors.eval()

    def step_loss() -> torch.Tensor:
        return alignment_error(vlm, batcher, vectors, next(scenes))

    train.optimise([vlm], vision, step_loss, steps, schedule, desc="race: vision aligned to the scenes")
