"""The benchmarks as lmms-eval loads them (same hub ids, configs, splits and fields), or a local copy,
as Items (or counted Skipped rows) through each benchmark's parser (lmms_contam/registry/).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import datasets
import pyarrow as pa

from lmms_contam.items import Item, Skipped
from lmms_contam.registry.base import BenchmarkSpec
from lmms_contam.registry.specs import spec


def read_rows(source: str, split: str) -> datasets.Dataset:
    """A split of a local save_to_disk folder, a parquet file or folder of them, or a hub dataset id; a
    local copy that cannot be read is refused with its name."""
    path = Path(source)
    if not path.exists():
        return datasets.load_dataset(source, split=split)
    try:
        return _read_local(path, split)
    except (pa.ArrowException, datasets.exceptions.DatasetGenerationError, OSError, KeyError) as exc:
        raise ValueError(f"{source}: not a readable dataset copy ({type(exc).__name__}: {exc})") from exc


def _read_local(path: Path, split: str) -> datasets.Dataset:
    if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
        loaded = datasets.load_from_disk(str(path))
        return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
    if path.is_dir():
        files = sorted(str(p) for p in path.rglob("*.parquet"))
        return datasets.load_dataset("parquet", data_files={split: files}, split=split)
    return datasets.load_dataset("parquet", data_files={split: str(path)}, split=split)


def load_rows(benchmark: str, source: str | None = None) -> datasets.Dataset:
    """The benchmark's rows from its hub id (and config), or from a local copy or another hub id."""
    hub = _scannable(benchmark).source
    if source is None:
        return datasets.load_dataset(hub.hub_id, hub.config, split=hub.split)
    return read_rows(source, hub.split)


def _scannable(benchmark: str) -> BenchmarkSpec:
    found = spec(benchmark)
    if not found.scannable:
        raise ValueError(f"{benchmark} is not read from a hub dataset's rows (no source and parser in the registry)")
    return found


def original_ids(benchmark: str, rows: datasets.Dataset) -> list[str]:
    """Every row's id, read from its id columns only (no image is decoded)."""
    return _scannable(benchmark).parser.ids(rows)


def items(benchmark: str, rows: datasets.Dataset) -> Iterator[Item | Skipped]:
    """Every row as an Item, or as a Skipped with the reason it cannot take part."""
    parser = _scannable(benchmark).parser
    for original_id, row in zip(parser.ids(rows), rows, strict=True):
        yield parser.parse(row, original_id)


def items_of(benchmark: str, rows: datasets.Dataset, ids: set[str]) -> dict[str, Item]:
    """The Items with these ids, decoding only their rows' images."""
    wanted = [i for i, row_id in enumerate(original_ids(benchmark, rows)) if row_id in ids]
    return {item.original_id: item for item in items(benchmark, rows.select(wanted)) if isinstance(item, Item)}


def scanned_ids(benchmark: str, rows: datasets.Dataset) -> list[str]:
    """The ids of the items a scan embeds (those `items` yields as Items), without decoding any image."""
    parser = _scannable(benchmark).parser
    undecoded = (row for batch in rows.with_format("arrow").iter(batch_size=256) for row in batch.to_pylist())
    return [i for i, row in zip(parser.ids(rows), undecoded, strict=True) if isinstance(parser.parse(row, i), Item)]
