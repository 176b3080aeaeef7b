"""The detector race's models: one clean model that reads the options, and per seed a copy fine-tuned on each
kind of contamination (race_data.KINDS) and a control fine-tuned alike on fresh items.

The clean model is larger than the demo's (its text model 256 wide and 6 deep) and trained in stages
(scene_reading.py): the demo's learns colour -> letter on the fixed benchmark, but trained on images alone a
model stays at chance where each item lists its own options in its own order. A model's folder is named by a
digest of the settings that made it (the clean model's, and for a copy the clean model's and its fine-tuning's),
so another recipe trains other folders and a changed fine-tuning keeps the clean model; the clean model's first
two stages have a folder of their own (`read-<digest>`), so a changed tuning on images keeps the reading. A folder
that exists is finished (folders appear by rename), so a rerun trains only what is missing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast

from lmms_contam.fingerprint import digest
from lmms_contam.lab import race_data, scene_reading, tiny_vlm, train
from lmms_contam.lab.race_data import CLEAN
from lmms_contam.stats import stable_seed

CLEAN_SETTINGS = ("size", "token_breaks", "read_", "align_", "clean_")  # what the clean model is made with
# What its first two stages (reading scenes, aligning the vision side) are made with: they are kept in a folder of
# their own, so that a change to the tuning on images does not redo the reading (most of the clean model's time).
READ_SETTINGS = ("size", "token_breaks", "read_", "align_", "clean_batch", "clean_lr_decay")


@dataclass(frozen=True)
class RaceRecipe:
    """Every training setting, fixed before the race runs."""

    test_items: int = 300
    seeds: tuple[int, ...] = (0, 1, 2)
    size: tiny_vlm.TinyLlavaSize = field(default_factory=lambda: tiny_vlm.TinyLlavaSize(text_hidden=256, text_layers=6))
    # Where token merges stop (lmms-eval's MMStar layout: "Options: A: red, B: cobalt, ..."): each option, its letter
    # and its text, is one token of its own. With the demo's merges across options (", C: pink, D: " one token,
    # the last option fused with the post-prompt) the model never learnt to read the options.
    token_breaks: str | None = r", |\n|\?|Options: "
    # The clean model's three stages (scene_reading.py): reading scenes given as vectors, the vision side aligned
    # to them, then the whole model tuned on images. A 6-layer text model learns nothing at 1e-3 (issue 44's probes).
    read_steps: int = 8000
    read_lr: float = 3e-4
    align_steps: int = 300
    align_lr: float = 1e-3
    clean_steps: int = 500
    clean_lr: float = 1e-4
    clean_batch: int = 64
    # The three stages at constant learning rates after warm-up, as in the probe that found the recipe. The race's
    # clean model on the test's clear items (2026-12-07, through lmms-eval): after 8000 reading steps vanilla 0.937,
    # CircularEval 0.839; after 4000, 0.865 and 0.735; with cosine decay (4000) 0.80 and 0.51 (its reading comes
    # late, and decay leaves it no time to settle).
    clean_lr_decay: bool = False
    finetune_epochs: int = 10
    finetune_batch: int = 16
    # Full fine-tuning at 5e-4 undid the staged model's reading in a throw-away probe (seed 0): a control's
    # CircularEval on clear items 0.58, the clean model's 0.84. At 1e-4 the control kept 0.76 and the leaked items
    # were still learnt (0.96 right, 0.69 on their counterfactuals; the control 0.72 and 0.70).
    finetune_lr: float = 1e-4

    def made_with(self, kind: str) -> str:
        """A digest of the settings that make a model of `kind` (the clean model's are part of every copy's)."""
        clean = self._settings(CLEAN_SETTINGS)
        if kind == CLEAN:
            return digest(clean)[:10]
        return digest({"clean": clean, "fine-tuning": self._settings(("finetune_", "test_items"))})[:10]

    def read_with(self) -> str:
        """A digest of the settings of the clean model's first two stages."""
        return digest(self._settings(READ_SETTINGS))[:10]

    def _settings(self, prefixes: tuple[str, ...]) -> dict:
        return {key: value for key, value in asdict(self).items() if key.startswith(prefixes)}


@dataclass(frozen=True)
class RaceModel:
    kind: str  # CLEAN, a kind of contamination, or race_data.CONTROL
    seed: int = 0

    @property
    def name(self) -> str:
        return CLEAN if self.kind == CLEAN else f"{self.kind}-seed{self.seed}"

    def folder(self, root: Path, recipe: RaceRecipe) -> Path:
        return root / f"{self.name}-{recipe.made_with(self.kind)}"


def plan(recipe: RaceRecipe) -> list[RaceModel]:
    """The clean model, then per seed every kind of contamination and the control."""
    kinds = (*race_data.KINDS, race_data.CONTROL)
    return [RaceModel(CLEAN), *(RaceModel(kind, seed) for seed in recipe.seeds for kind in kinds)]


def train_clean(recipe: RaceRecipe, root: Path) -> Path:
    folder = RaceModel(CLEAN).folder(root, recipe)
    if folder.exists():
        return folder
    # Loaded from its folder even when just made: a fresh run and one reusing the reading take the same path.
    vlm, processor = tiny_vlm.load_tiny_vlm(read_and_align(recipe, root))
    batches = race_data.clean_batches(0, recipe.clean_batch)
    tuning = _staged(recipe, recipe.clean_lr)
    train.fit(vlm, train.Batcher(processor), batches, recipe.clean_steps, tuning, desc="race: clean model on images")
    return tiny_vlm.save_tiny_vlm(vlm, processor, folder)


def read_and_align(recipe: RaceRecipe, root: Path) -> Path:
    """The clean model's first two stages, in a folder named by their settings (READ_SETTINGS)."""
    folder = root / f"read-{recipe.read_with()}"
    if folder.exists():
        return folder
    vlm, processor = tiny_vlm.new_tiny_llava(race_tokenizer(recipe), recipe.size, seed=0)
    batcher, vectors = train.Batcher(processor), scene_reading.SceneVectors(recipe.size.text_hidden)
    reading = race_data.reading_batches(0, recipe.clean_batch)
    scene_reading.read_scenes(vlm, batcher, vectors, reading, recipe.read_steps, _staged(recipe, recipe.read_lr))
    aligning = race_data.alignment_scenes(0, recipe.clean_batch)
    scene_reading.align_vision(vlm, batcher, vectors, aligning, recipe.align_steps, _staged(recipe, recipe.align_lr))
    return tiny_vlm.save_tiny_vlm(vlm, processor, folder)


def _staged(recipe: RaceRecipe, lr: float) -> train.Schedule:
    return train.Schedule(lr=lr, decay=recipe.clean_lr_decay)


def race_tokenizer(recipe: RaceRecipe) -> PreTrainedTokenizerFast:
    """Trained on the race's texts as the model reads them, with the recipe's breaks."""
    return tiny_vlm.build_tokenizer(_templated(race_data.vocabulary()), breaks=recipe.token_breaks)


def _templated(texts: list[str]) -> list[str]:
    """The texts as the model reads them: chat-templated with the image first (merges may cross the template)."""
    _, bootstrap = tiny_vlm.new_tiny_llava(tiny_vlm.build_tokenizer(["A B C D"]))
    return [train.prompt_text(bootstrap, text) for text in texts] + ["A", "B", "C", "D"]


def fine_tune(model: RaceModel, recipe: RaceRecipe, clean: Path, root: Path) -> Path:
    """Full fine-tuning from the clean model, its own warm-up and cosine decay over the epochs: each batch half
    the kind's data, half fresh items of the clean model's tasks (a leak is a part of what a model trains on,
    and the replay keeps the skills every detector asks for, the masked-option format among them)."""
    folder = model.folder(root, recipe)
    if folder.exists():
        return folder
    torch.manual_seed(stable_seed("race-fine-tune", model.kind, str(model.seed)))
    vlm, processor = tiny_vlm.load_tiny_vlm(clean)
    data = race_data.contamination(model.kind, recipe.test_items, model.seed)
    half = recipe.finetune_batch // 2
    leaked = train.epochs_of(data, half, model.seed)
    replay = race_data.clean_batches(stable_seed("race-replay", model.kind, str(model.seed)) % 10**6, half)
    steps = recipe.finetune_epochs * -(-len(data) // half)
    train.fit(
        vlm,
        train.Batcher(processor),
        (next(leaked) + next(replay) for _ in range(steps)),
        steps,
        train.Schedule(lr=recipe.finetune_lr, warmup=20),
        desc=f"race: {model.name}",
    )
    return tiny_vlm.save_tiny_vlm(vlm, processor, folder)


def build_race_models(recipe: RaceRecipe, root: Path) -> dict[RaceModel, Path]:
    """Train what is missing; returns every planned model's folder."""
    clean = train_clean(recipe, root)
    return {model: clean if model.kind == CLEAN else fine_tune(model, recipe, clean, root) for model in plan(recipe)}
