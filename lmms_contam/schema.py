"""The perturbed-set schema (version 1): one row per kept item, holding both of its versions.

A row pairs an original benchmark item with its counterfactual: the same question and options,
a new image, and a new gold answer. Tasks, importers and the perturbation pipeline all read and
write this one layout, so a set made by any of them runs through the same tasks.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image as PILImage
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.imaging import decoding_error, strict_decoding
from lmms_contam.letters import option_letters
from lmms_contam.registry.base import BenchmarkColumns
from lmms_contam.registry.specs import SPECS, perturbable

SCHEMA_VERSION = 1
VERIFIED_SUBSET = "verified"  # a set folder's subfolder holding the items `lmms-contam verify` kept

COMMON_COLUMNS: dict[str, datasets.features.FeatureType] = {
    "item_id": datasets.Value("string"),
    "original_id": datasets.Value("string"),
    "benchmark": datasets.Value("string"),
    "question": datasets.Value("string"),
    "options": datasets.Sequence(datasets.Value("string")),
    "original_answer": datasets.Value("string"),
    "new_answer": datasets.Value("string"),
    "original_image": datasets.Image(),
    "image": datasets.Image(),
    "provenance": datasets.Value("string"),
    "schema_version": datasets.Value("int32"),
}

IMAGE_COLUMNS = ("original_image", "image")


class PerturbedSetError(ValueError):
    """A perturbed set that cannot be used as it is; the message names the source and the row."""


def columns_for(benchmark: str) -> BenchmarkColumns:
    columns = SPECS[benchmark].columns if benchmark in SPECS else None
    if columns is None:
        raise PerturbedSetError(f"no perturbed sets of benchmark {benchmark!r}; known: {', '.join(perturbable())}")
    return columns


def features_for(benchmark: str) -> datasets.Features:
    extra = {name: datasets.Value("string") for name in columns_for(benchmark).extra}
    return datasets.Features({**COMMON_COLUMNS, **extra})


def listed_options(options: list[str] | tuple[str, ...]) -> str:
    """Options the way every prompt shows them: one "A. text" per line."""
    return "\n".join(f"{letter}. {text}" for letter, text in zip(option_letters(len(options)), options, strict=True))


def allowed_answers(benchmark: str, options: list[str]) -> list[str]:
    if columns_for(benchmark).answer_style == "letter":
        return option_letters(len(options))
    return list(options)


def validate(dataset: datasets.Dataset, benchmark: str, source: str) -> None:
    """Raise PerturbedSetError on the first problem, naming the source, row and field."""
    if len(dataset) == 0:
        raise PerturbedSetError(f"{source}: holds no rows")
    expected = features_for(benchmark)
    missing = [name for name in expected if name not in dataset.column_names]
    if missing:
        raise PerturbedSetError(
            f"{source}: missing column(s) {', '.join(missing)} (schema version {SCHEMA_VERSION}, "
            f"benchmark {benchmark}); found: {', '.join(dataset.column_names)}"
        )
    text_columns = [name for name in expected if name not in IMAGE_COLUMNS]
    table = dataset.select_columns(text_columns).to_dict()
    seen: dict[str, dict[str, int]] = {"item_id": {}, "original_id": {}}
    for row in range(len(dataset)):
        where = f"{source}: row {row} (item_id {table['item_id'][row]!r})"
        version = table["schema_version"][row]
        if version != SCHEMA_VERSION:
            raise PerturbedSetError(f"{where}: schema_version {version}, this lmms-contam reads {SCHEMA_VERSION}")
        if table["benchmark"][row] != benchmark:
            raise PerturbedSetError(f"{where}: benchmark {table['benchmark'][row]!r}, expected {benchmark!r}")
        for id_column, first_rows in seen.items():
            value = table[id_column][row]
            if not value:
                raise PerturbedSetError(f"{where}: empty {id_column}")
            if value in first_rows:
                raise PerturbedSetError(
                    f"{where}: duplicate {id_column} {value!r}, first seen in row {first_rows[value]}"
                )
            first_rows[value] = row
        options = table["options"][row] or []
        if len(options) < 2:
            raise PerturbedSetError(f"{where}: needs at least two options, has {len(options)}")
        allowed = allowed_answers(benchmark, options)
        for field in ("original_answer", "new_answer"):
            if table[field][row] not in allowed:
                raise PerturbedSetError(
                    f"{where}: {field} {table[field][row]!r} is not among the options ({', '.join(allowed)})"
                )
        if table["original_answer"][row] == table["new_answer"][row]:
            raise PerturbedSetError(f"{where}: new_answer equals original_answer; a perturbation must change it")
        slots = SPECS[benchmark].group_slots
        if slots and table["group_slot"][row] not in slots:
            raise PerturbedSetError(f"{where}: group_slot {table['group_slot'][row]!r} not in {slots}")
    _check_images(dataset, source, table["item_id"])


def _check_images(dataset: datasets.Dataset, source: str, item_ids: list[str]) -> None:
    """Decode every image once, so a broken file fails here and not mid-evaluation."""
    raw = dataset.select_columns(list(IMAGE_COLUMNS))
    for column in IMAGE_COLUMNS:
        raw = raw.cast_column(column, datasets.Image(decode=False))
    progress = tqdm(total=len(raw), desc=f"lmms-contam: checking images of {source}", disable=len(raw) < 200)
    with strict_decoding():
        for row, record in enumerate(raw):
            for column in IMAGE_COLUMNS:
                _decode_or_fail(record[column], f"{source}: row {row} (item_id {item_ids[row]!r}), column {column!r}")
            progress.update(1)
    progress.close()


def _decode_or_fail(value: dict | None, where: str) -> None:
    if value is None or (not value.get("bytes") and not value.get("path")):
        raise PerturbedSetError(f"{where}: no image")
    try:
        stream = io.BytesIO(value["bytes"]) if value.get("bytes") else open(value["path"], "rb")  # noqa: SIM115
        with stream, PILImage.open(stream) as image:
            image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise PerturbedSetError(f"{where}: unreadable image ({decoding_error(exc)})") from exc


def read_set_files(files: list[str]) -> datasets.Dataset:
    """A set's parquet files as one split; a damaged, truncated or empty file is refused by name."""
    for file in files:
        try:
            rows = pq.ParquetFile(file).metadata.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise PerturbedSetError(f"{file}: not a readable parquet file (truncated or damaged?): {exc}") from exc
        if rows == 0:
            raise PerturbedSetError(f"{file}: holds no rows")
    try:
        return datasets.load_dataset("parquet", data_files={"test": files}, split="test")
    except (pa.ArrowException, datasets.exceptions.DatasetGenerationError, OSError) as exc:
        cause = exc.__cause__ or exc
        raise PerturbedSetError(f"{', '.join(files)}: not a readable parquet set ({cause})") from exc


def manifest_beside(data_file: Path) -> Path:
    """Where a set's manifest lives: `<stem>.manifest.json` next to its data file (data.manifest.json in a
    set folder), written by every command that makes a set and read by the tasks and the report."""
    return data_file.with_name(data_file.stem + ".manifest.json")


def write_parquet(rows: Iterable[dict], benchmark: str, path: str | os.PathLike) -> Path:
    """Write rows as one parquet file with Image features; the file appears only when complete."""
    dataset = datasets.Dataset.from_list(list(rows), features=features_for(benchmark))
    validate(dataset, benchmark, str(path))
    with atomic_path(path) as tmp:
        dataset.to_parquet(str(tmp))
    return Path(path)
