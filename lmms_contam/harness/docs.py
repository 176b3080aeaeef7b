"""`process_docs` functions of the plugin's tasks.

The task YAMLs load a one-line locator file (lmms-eval needs some dataset to start from); these
functions replace it with the resolved perturbed set, shaped as the built-in task's documents.
Paired tasks interleave the two versions of each item, so `--limit 2k` keeps k whole pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import datasets

from lmms_contam.harness.builtin import BUILTIN_TASKS, VARIANTS
from lmms_contam.harness.datasets import load_perturbed_set
from lmms_contam.schema import IMAGE_COLUMNS
from lmms_contam.stats import stable_seed


def build_docs(rows: datasets.Dataset, benchmark: str, variants: tuple[str, ...]) -> datasets.Dataset:
    """Turn schema rows into built-in-shaped docs, one per (row, variant), without re-encoding images."""
    task = BUILTIN_TASKS[benchmark]
    raw = rows
    for column in IMAGE_COLUMNS:
        raw = raw.cast_column(column, datasets.Image(decode=False))

    def expand(batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = defaultdict(list)
        for i in range(len(batch["item_id"])):
            row = {key: values[i] for key, values in batch.items()}
            for variant in variants:
                for key, value in task.to_doc(row, variant).items():
                    out[key].append(value)
        return dict(out)

    fingerprint = f"{stable_seed('lmms-contam-docs', raw._fingerprint, benchmark, *variants):016x}"
    docs = raw.map(expand, batched=True, remove_columns=raw.column_names, new_fingerprint=fingerprint)
    return docs.cast_column(task.image_field, datasets.Image())


def _process_docs(benchmark: str, variants: tuple[str, ...]) -> Callable[[datasets.Dataset], datasets.Dataset]:
    def process_docs(_locator: datasets.Dataset) -> datasets.Dataset:
        return build_docs(load_perturbed_set(benchmark), benchmark, variants)

    process_docs.__name__ = f"{benchmark}_{'paired' if len(variants) > 1 else variants[0]}"
    return process_docs


mmstar_original = _process_docs("mmstar", ("original",))
mmstar_perturbed = _process_docs("mmstar", ("perturbed",))
mmstar_paired = _process_docs("mmstar", VARIANTS)
realworldqa_original = _process_docs("realworldqa", ("original",))
realworldqa_perturbed = _process_docs("realworldqa", ("perturbed",))
realworldqa_paired = _process_docs("realworldqa", VARIANTS)
naturalbench_original = _process_docs("naturalbench", ("original",))
naturalbench_perturbed = _process_docs("naturalbench", ("perturbed",))
naturalbench_paired = _process_docs("naturalbench", VARIANTS)
synthetic_original = _process_docs("synthetic", ("original",))
synthetic_perturbed = _process_docs("synthetic", ("perturbed",))
synthetic_paired = _process_docs("synthetic", VARIANTS)
