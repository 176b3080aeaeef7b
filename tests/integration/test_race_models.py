"""The detector race's models: where each is kept, so that a rerun trains only what its settings change."""

from __future__ import annotations

from dataclasses import replace

import torch

from lmms_contam.lab.race_models import CLEAN, RaceModel, RaceRecipe, plan

STAGES = ("read", "align", "clean")  # the clean model's stages: reading scenes, alignment, tuning on images


def test_a_models_folder_names_the_settings_that_made_it(tmp_path):
    recipe = RaceRecipe()
    folders = {model: model.folder(tmp_path, recipe) for model in plan(recipe)}
    assert len(set(folders.values())) == len(folders) == 1 + 3 * 5  # clean, then 4 kinds and a control per seed
    longer = replace(recipe, finetune_epochs=recipe.finetune_epochs + 5)
    assert RaceModel(CLEAN).folder(tmp_path, longer) == folders[RaceModel(CLEAN)]  # the clean model is kept
    assert RaceModel("control", 1).folder(tmp_path, longer) != folders[RaceModel("control", 1)]
    every_stage = [replace(recipe, **{f"{stage}_steps": getattr(recipe, f"{stage}_steps") + 1}) for stage in STAGES]
    for changed in (*every_stage, replace(recipe, token_breaks="[,]"), replace(recipe, clean_lr_decay=True)):
        assert not {model.folder(tmp_path, changed) for model in folders} & set(folders.values())


def test_the_reading_stages_folder_is_kept_when_only_the_tuning_on_images_changes():
    recipe = RaceRecipe()
    for kept in (replace(recipe, clean_steps=900), replace(recipe, clean_lr=3e-4), replace(recipe, finetune_lr=1e-3)):
        assert kept.read_with() == recipe.read_with()
    changed = [replace(recipe, read_steps=10), replace(recipe, align_lr=1e-2), replace(recipe, clean_batch=32),
               replace(recipe, clean_lr_decay=True), replace(recipe, token_breaks=None)]  # fmt: skip
    assert len({other.read_with() for other in changed} | {recipe.read_with()}) == len(changed) + 1


def test_a_changed_tuning_on_images_starts_from_the_kept_reading(tmp_path, monkeypatch):
    """A tiny recipe end to end: the first clean model reads, aligns and tunes; a second with more tuning steps
    is another clean folder made from the same reading folder, without reading again."""
    from lmms_contam.lab import race_models, scene_reading, tiny_vlm

    recipe = RaceRecipe(size=tiny_vlm.TinyLlavaSize(), read_steps=3, align_steps=2, clean_steps=2, clean_batch=8)
    first = race_models.train_clean(recipe, tmp_path)
    (reading,) = tmp_path.glob("read-*")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, reading.name])

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the reading stage ran again")

    monkeypatch.setattr(scene_reading, "read_scenes", no_reading)
    second = race_models.train_clean(replace(recipe, clean_steps=3), tmp_path)
    assert second != first and sorted(tmp_path.glob("read-*")) == [reading]
    tuned, read = (tiny_vlm.load_tiny_vlm(folder)[0].state_dict() for folder in (second, reading))
    assert any(not torch.equal(tuned[name], read[name]) for name in read)  # the tuning moved the read weights


def test_the_race_tokenizer_reads_each_option_as_one_token_of_its_own():
    """Read as the clean model reads them, the options of varied items are one token each, its letter and its text
    ("A: red"), whatever the order; the demo's merges fuse neighbouring options and the post-prompt instead."""
    from lmms_contam.lab import tiny_vlm, train
    from lmms_contam.lab.race_models import race_tokenizer
    from lmms_contam.synthetic.benchmark import VARIED, example, test_scenes

    race, demo = race_tokenizer(RaceRecipe()), race_tokenizer(RaceRecipe(token_breaks=None))
    _, processor = tiny_vlm.new_tiny_llava(race)
    fused = 0
    for _, scene in test_scenes(60, of=VARIED):
        text = train.prompt_text(processor, train.host_text(example(scene).question))
        tokens = [race.decode([i]) for i in race(text)["input_ids"]]
        options = [f"{letter}: {name}" for letter, name in zip("ABCD", scene.options, strict=True)]
        at = tokens.index("Options: ")
        assert tokens[at + 1 : at + 8] == [options[0], ", ", options[1], ", ", options[2], ", ", options[3]], tokens
        fused += not set(options) <= {demo.decode([i]) for i in demo(text)["input_ids"]}
    assert fused == 60  # the check can fail: the demo's tokenizer reads no item's options so


def test_a_document_learns_its_prompt_text_but_not_the_image_and_an_answer_may_be_text():
    from PIL import Image

    from lmms_contam.lab import tiny_vlm, train
    from lmms_contam.synthetic.benchmark import Example

    _, bootstrap = tiny_vlm.new_tiny_llava(tiny_vlm.build_tokenizer(["A B C D"]))
    texts = [train.prompt_text(bootstrap, t) for t in ("What colour is it?\nOptions: A: red, B: cobalt", "Name it.")]
    _, processor = tiny_vlm.new_tiny_llava(tiny_vlm.build_tokenizer([*texts, "crimson", "A", "B"]))
    batcher, image = train.Batcher(processor), Image.new("RGB", (32, 32))
    question = "What colour is it?\nOptions: A: red, B: cobalt"
    examples = [
        Example(image, question, "B"),
        Example(image, question, "B", learn_prompt=True),
        Example(image, "Name it.", "crimson", asked="Name it."),
    ]
    batch = batcher.training_batch(examples)
    ids, labels, eos = batch["input_ids"], batch["labels"], processor.tokenizer.eos_token_id
    image_token = processor.tokenizer.convert_tokens_to_ids("<image>")
    prompt = batcher.prompt_ids(batcher.asked_text(examples[0]))
    letter = [batcher.letter_ids["B"], eos]
    assert labels[0].tolist() == [train.IGNORE] * len(prompt) + letter  # the answer alone
    learnt = labels[1, : len(prompt)].tolist()
    assert prompt.count(image_token) == 4  # the image's tokens are in the prompt, and never learnt
    assert all(
        (label == train.IGNORE) == (token == image_token) for token, label in zip(prompt[1:], learnt[1:], strict=True)
    )
    assert [t for t in learnt if t != train.IGNORE] == [t for t in prompt[1:] if t != image_token]
    assert labels[1, len(prompt) :].tolist() == letter
    named = batcher.prompt_ids("Name it.")
    answer = processor.tokenizer("crimson", add_special_tokens=False)["input_ids"]
    assert labels[2, len(named) : len(named) + len(answer) + 1].tolist() == [*answer, eos]
    assert ids[2, len(named) : len(named) + len(answer)].tolist() == answer
