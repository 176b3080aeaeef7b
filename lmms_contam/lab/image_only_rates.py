"""The image-only contamination rate of the synthetic benchmark against each model's training data.

The same scan as for real benchmarks (`corpus.scan_job.scan_source`), with the pixel copy detector as the
embedder: on 32x32 procedural scenes learned features cannot tell a copy from a stranger (README). The
corpora are the images each model was trained on: the clean model's stream of fresh scenes, the test
items the contaminated models were fine-tuned on, and the control's fresh items.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PIL import Image

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus.embed import PixelEmbedder
from lmms_contam.corpus.embedder_configs import embedder_config
from lmms_contam.corpus.eval_sources import DatasetSource
from lmms_contam.corpus.scan_job import scan_source
from lmms_contam.lab.experiment_models import TrainingRecipe
from lmms_contam.synthetic import benchmark

TRAINING_DATA = ("clean", "contaminated", "control")


def training_images(data: str, recipe: TrainingRecipe, seed: int) -> list[Image.Image]:
    """Exactly the images a model of that kind was trained on (regenerated from the same seeds)."""
    if data == "clean":
        batches = itertools.islice(benchmark.training_batches(seed, recipe.clean_batch), recipe.clean_steps)
        return [example.image for batch in batches for example in batch]
    if data == "contaminated":
        return [example.image for example in benchmark.original_examples(recipe.test_items)]
    return [example.image for example in benchmark.control_examples(recipe.test_items, seed)]


def _write_corpus(folder: Path, vectors: np.ndarray, embedder: PixelEmbedder) -> None:
    """A one-shard corpus in the layout `scan` reads; the vectors file last marks it complete."""
    with atomic_path(folder / "recipe.json") as tmp:
        tmp.write_text(json.dumps(asdict(embedder.recipe), indent=2))
    with atomic_path(folder / "img_emb" / "img_emb_0.npy") as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors, allow_pickle=False)


def image_only_rates(recipe: TrainingRecipe, seed: int, test_set: Path, out: Path) -> dict[str, dict]:
    """Per training data: the scan's rate (at the pixel recipe's threshold) and the corpus size."""
    pixels = embedder_config("pixels")
    embedder = pixels.build()
    rates = {}
    for data in TRAINING_DATA:
        corpus = out / "corpora" / f"seed{seed}-{data}"
        if not (corpus / "img_emb" / "img_emb_0.npy").exists():
            _write_corpus(corpus, embedder.embed(training_images(data, recipe, seed)), embedder)
        label = f"synthetic-vs-{data}-seed{seed}"
        test = DatasetSource(
            dataset=str(test_set), split="test", image_column="original_image", id_column="item_id", label=label
        )
        summary = scan_source(test, corpus, out / "scans", embedder, pixels.threshold)
        rates[data] = {
            "image_only_rate": summary.image_only_rate,
            "threshold": summary.threshold,
            "corpus_rows": summary.corpus_rows,
            "images": summary.images,
            "rates": summary.rates,
        }
    return rates
