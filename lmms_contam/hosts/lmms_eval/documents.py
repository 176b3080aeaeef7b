"""`process_docs` functions of the plugin's tasks.

The task YAMLs load a one-line locator file (lmms-eval needs some dataset to start from); these
functions replace it with the resolved perturbed set, shaped as the built-in task's documents.
Paired tasks interleave the two versions of each item, so `--limit 2k` keeps k whole pairs.
"""

from __future__ import annotations

import functools
import importlib
from collections import defaultdict
from collections.abc import Callable

import datasets

from lmms_contam.detectors.options import shown_in_order, shown_masked
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.fingerprint import package_code_digest
from lmms_contam.hosts.lmms_eval.bindings import binding, builtin_task
from lmms_contam.hosts.lmms_eval.swallowed import said_once
from lmms_contam.imaging import blank_png, stored_size
from lmms_contam.letters import option_letters
from lmms_contam.schema import IMAGE_COLUMNS, PerturbedSetError
from lmms_contam.set_locations import load_perturbed_set, lookup, manifest_sha256, resolve, switched_on
from lmms_contam.stats import stable_seed
from lmms_contam.versions import NO_IMAGE, item_versions


def build_docs(
    rows: datasets.Dataset,
    benchmark: str,
    versions: Callable[[dict], list[dict]],
    name: str,
    set_manifest: str | None = None,
) -> datasets.Dataset:
    """Turn schema rows into built-in-shaped docs, `versions(row)` per row, without re-encoding images.

    `name` identifies `versions` in the datasets cache fingerprint, with the package's code digest (documents
    an older or edited plugin shaped are never reused); `set_manifest`, the set's manifest hash,
    goes into every document and so into every record scored on it.
    """
    task = builtin_task(benchmark)
    raw = rows
    for column in IMAGE_COLUMNS:
        raw = raw.cast_column(column, datasets.Image(decode=False))

    def expand(batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = defaultdict(list)
        for i in range(len(batch["item_id"])):
            for doc in versions({key: values[i] for key, values in batch.items()}):
                for key, value in {**doc, "contam_set_manifest": set_manifest}.items():
                    out[key].append(value)
        return dict(out)

    key = ("lmms-contam-docs", raw._fingerprint, benchmark, name, str(set_manifest), package_code_digest())
    fingerprint = f"{stable_seed(*key):016x}"
    docs = raw.map(expand, batched=True, remove_columns=raw.column_names, new_fingerprint=fingerprint)
    if docs.data.column(task.image_field).null_count == len(docs):  # text-only documents sent with no image
        return docs
    return docs.cast_column(task.image_field, [datasets.Image()] if task.image_list else datasets.Image())


def scored_set_manifest(benchmark: str) -> str | None:
    return manifest_sha256(resolve(benchmark))


ROTATE_ALL_ENV = "LMMS_CONTAM_CIRCULAR_ROTATE_ALL"


def rotate_every_item() -> bool:
    """$LMMS_CONTAM_CIRCULAR_ROTATE_ALL=1 (or `circular_rotate_all: true` in the config file): CircularEval
    rotates the items whose options name option letters too, which VLMEvalKit leaves out."""
    found = lookup(ROTATE_ALL_ENV, "circular_rotate_all", None, [])
    return found is not None and switched_on(found[0])


TEXT_ONLY_IMAGE_ENV = "LMMS_CONTAM_TEXT_ONLY_IMAGE"


def text_only_input() -> str:
    """How text-only documents withhold the image: "blank" (the default) shows a grey canvas of the original's
    size, which every loader can take; "none" sends no image, MMStar's text-only mode, for loaders that take
    a prompt without one. $LMMS_CONTAM_TEXT_ONLY_IMAGE (or `text_only_image` in the config file) chooses:
    the task cannot ask the loader (lmms-eval's process_docs sees only the dataset), and a loader that
    cannot take it fails (llava_hf's chat loader does; its simple one, `--force_simple`, does not)."""
    found = lookup(TEXT_ONLY_IMAGE_ENV, "text_only_image", None, [])
    choice = str(found[0]).strip().lower() if found else "blank"
    if choice not in ("none", "blank"):
        raise PerturbedSetError(f"{TEXT_ONLY_IMAGE_ENV} (or text_only_image) must be none or blank, got {choice!r}")
    return choice


def text_only_visual(benchmark: str, builtin_visual: str) -> Callable[[dict], list]:
    """The text-only tasks' `doc_to_visual`: no image when the document carries none, else what the built-in
    `doc_to_visual` (a dotted path, imported on first use) makes of it."""
    image_field = binding(benchmark).image_field
    module, name = builtin_visual.rsplit(".", 1)

    def doc_to_visual(doc: dict) -> list:
        if doc[image_field] is None:
            return []
        return getattr(importlib.import_module(module), name)(doc)

    doc_to_visual.__name__ = f"{benchmark}_text_only_visual"
    return doc_to_visual


def documents(
    benchmark: str, family: str, row: dict, rotate_all: bool = False, text_only_as: str = "blank"
) -> list[dict]:
    """The documents a task of `family` asks of one set row (versions.item_versions), as the built-in task's."""
    task = builtin_task(benchmark)
    docs = []
    for version in item_versions(benchmark, family, row, rotate_all):
        if version.image is NO_IMAGE:
            blank = {"bytes": blank_png(stored_size(row["original_image"])), "path": None}
            doc = task.doc(
                row, variant=version.variant, gold=version.gold, image=None if text_only_as == "none" else blank
            )
            docs.append({**doc, "contam_text_only_input": text_only_as})
            continue
        shown = None
        if version.order is not None:
            shown = shown_in_order(benchmark, row["item_id"], row["question"], list(row["options"]), version.order)
        if version.hidden is None:
            docs.append(
                task.doc(row, variant=version.variant, gold=version.gold, image=row[version.image], shown=shown)
            )
            continue
        # The built-in document's answer is the masked option's letter (its own fields hold letters or indexes);
        # the text the reply must name is the record's gold.
        shown = shown_masked(benchmark, row["item_id"], row["question"], list(row["options"]), version.hidden)
        masked_letter = option_letters(len(row["options"]))[version.hidden]
        doc = task.doc(row, variant=version.variant, gold=masked_letter, image=row[version.image], shown=shown)
        docs.append({**doc, "contam_gold": version.gold})
    return docs


def task_docs(benchmark: str, family: str) -> Callable[[datasets.Dataset], datasets.Dataset]:
    """The `process_docs` of one of a benchmark's perturbation or detector tasks."""

    def process_docs(_locator: datasets.Dataset) -> datasets.Dataset:
        detector = DETECTORS.get(family)
        rotate_all = bool(detector and detector.leaves_out_items and rotate_every_item())
        withholds_image = bool(detector and detector.withholds_image)
        text_only_as = text_only_input() if withholds_image else "blank"
        versions = functools.partial(documents, benchmark, family, rotate_all=rotate_all, text_only_as=text_only_as)
        name = f"{benchmark}_{family}" + ("_rotate_all" if rotate_all else "")  # the docs' cache key
        name += f"_{text_only_as}" if withholds_image else ""
        return build_docs(
            said_once(lambda: load_perturbed_set(benchmark)), benchmark, versions, name, scored_set_manifest(benchmark)
        )

    process_docs.__name__ = f"{benchmark}_{family}"
    return process_docs
