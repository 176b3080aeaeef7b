"""The race's clean model's stages: scenes read as vectors, the vision side aligned to them, the letter choice."""

from __future__ import annotations

import pytest
import torch

from lmms_contam.lab import race_data, scene_reading, tiny_vlm, train
from lmms_contam.lab.race_models import RaceRecipe, race_tokenizer
from lmms_contam.synthetic import benchmark
from lmms_contam.synthetic.benchmark import VARIED
from lmms_contam.synthetic.scenes import render, shape_box


@pytest.fixture(scope="module")
def tiny():
    vlm, processor = tiny_vlm.new_tiny_llava(race_tokenizer(RaceRecipe()))
    return vlm, train.Batcher(processor)


def test_each_cell_vector_describes_the_cell_the_image_token_sees():
    """Cells in the image tokens' order: the shape's centre pixel has the cell's colour, and the rest none."""
    for _, scene in benchmark.test_scenes(40, of=VARIED):
        image = render(scene)
        for cell, (shape, colour) in enumerate(scene_reading.cell_contents(scene)):
            left, top, right, bottom = shape_box(cell)
            centre = image.getpixel((int((left + right) / 2), int((top + bottom) / 2) + 2))
            assert centre == tuple(colour), (scene, cell, shape)


def test_a_letter_is_learnt_as_a_choice_among_the_letters(tiny):
    vlm, batcher = tiny
    pairs = next(race_data.reading_batches(0, 6))  # four questions, two naming
    batch = batcher.training_batch([example for example, _ in pairs])
    with torch.no_grad():
        logits = vlm(**{k: v for k, v in batch.items() if k != "labels"}).logits
    letters = list(batcher.letter_ids.values())
    base = scene_reading.choice_loss(logits, batch["labels"], letters)
    answer_at = (batch["labels"][:, 1:] != train.IGNORE).int().argmax(dim=-1)[:4]  # the questions' letters
    rows = torch.arange(4)
    gold = batch["labels"][rows, 1 + answer_at]
    assert set(gold.tolist()) <= set(letters)
    pad = batcher.processor.tokenizer.pad_token_id
    lifted = logits.clone()
    lifted[rows, answer_at, pad] += 5.0  # another token than a letter, where a letter is the answer
    full = torch.nn.functional.cross_entropy  # the whole vocabulary's loss rises, the choice's does not
    assert full(lifted[rows, answer_at], gold) > full(logits[rows, answer_at], gold) + 0.1
    assert torch.isclose(scene_reading.choice_loss(lifted, batch["labels"], letters), base)
    helped = logits.clone()
    helped[rows, answer_at, gold] += 5.0
    assert scene_reading.choice_loss(helped, batch["labels"], letters) < base - 0.1


def test_reading_then_alignment_make_a_model_that_reads_images_as_the_scenes(tiny, tmp_path):
    """Reading moves the text model and not the vision side; alignment brings the image features to the scene
    vectors; the saved model sees the images as aligned, without the vectors."""
    vlm, batcher = tiny
    vectors = scene_reading.SceneVectors(vlm.config.text_config.hidden_size)
    vision = {n: p.detach().clone() for n, p in vlm.named_parameters() if n.startswith(scene_reading.VISION)}
    language = {n: p.detach().clone() for n, p in vlm.named_parameters() if n not in vision}
    reading = race_data.reading_batches(0, 8)
    scene_reading.read_scenes(vlm, batcher, vectors, reading, 3, train.Schedule(lr=1e-3, warmup=0))
    assert all(torch.equal(p, vision[n]) for n, p in vlm.named_parameters() if n in vision)
    assert any(not torch.equal(p, language[n]) for n, p in vlm.named_parameters() if n in language)

    language = {n: p.detach().clone() for n, p in vlm.named_parameters() if n in language}  # after reading
    held_out = [scene for _, scene in benchmark.test_scenes(32, of=VARIED)]
    with torch.no_grad():
        before = scene_reading.alignment_error(vlm, batcher, vectors, held_out).item()
    aligning = race_data.alignment_scenes(0, 32)
    scene_reading.align_vision(vlm, batcher, vectors, aligning, 60, train.Schedule(lr=3e-3, warmup=5))
    with torch.no_grad():
        after = scene_reading.alignment_error(vlm, batcher, vectors, held_out).item()
    assert after < 0.5 * before, (before, after)
    assert all(torch.equal(p, language[n]) for n, p in vlm.named_parameters() if n in language)

    loaded, _ = tiny_vlm.load_tiny_vlm(tiny_vlm.save_tiny_vlm(vlm, batcher.processor, tmp_path / "clean"))
    with torch.no_grad():
        reloaded = scene_reading.alignment_error(loaded, batcher, vectors, held_out).item()
    assert reloaded == pytest.approx(after, rel=1e-4)
