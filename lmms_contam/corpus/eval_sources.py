"""What a scan measures: a benchmark (through the same loaders as the tasks), an image folder, or any
dataset with an image column. Each gives (id, image) pairs in a fixed order and a description of itself
that the scan's summary records, and a fingerprint of its content that the scan's cache of eval
vectors is keyed on (so images added to a folder, or another copy of a benchmark, are embedded anew).
Local paths are kept absolute, so a summary read from another working directory finds them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets
from PIL import Image

from lmms_contam.benchmarks import loaders
from lmms_contam.corpus.embed import decode
from lmms_contam.corpus.ingest import IMAGE_SUFFIXES
from lmms_contam.fingerprint import absolute, listing_identity, local_or_hub
from lmms_contam.items import Item
from lmms_contam.registry.specs import SPECS


@dataclass(frozen=True)
class BenchmarkSource:
    benchmark: str
    originals: str | None = None  # a local copy; None: lmms-eval's hub id

    def __post_init__(self) -> None:
        object.__setattr__(self, "originals", absolute(self.originals))

    @property
    def name(self) -> str:
        return self.benchmark

    @property
    def description(self) -> str:
        return self.originals or "hub"

    def count(self) -> int:
        return len(loaders.load_rows(self.benchmark, self.originals))

    def fingerprint(self) -> dict:
        def loaded() -> str:
            return loaders.load_rows(self.benchmark, self.originals)._fingerprint

        source = self.originals or SPECS[self.benchmark].source.hub_id
        return {"benchmark": self.benchmark, **local_or_hub(source, loaded)}

    def images(self) -> Iterator[tuple[str, Image.Image]]:
        for item in loaders.items(self.benchmark, loaders.load_rows(self.benchmark, self.originals)):
            if isinstance(item, Item):
                yield item.original_id, item.image

    def images_of(self, ids: set[str]) -> dict[str, Image.Image]:
        found = loaders.items_of(self.benchmark, loaders.load_rows(self.benchmark, self.originals), ids)
        return {original_id: item.image for original_id, item in found.items()}


@dataclass(frozen=True)
class FolderSource:
    """Every image under a folder, its id the path relative to the folder; an unreadable file is an error."""

    folder: str
    label: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", str(Path(self.folder).resolve()))

    @property
    def name(self) -> str:
        return self.label or Path(self.folder).name

    @property
    def description(self) -> str:
        return f"folder {self.folder}"

    def fingerprint(self) -> dict:
        """Every image's name, size and modification time: an added, removed or rewritten image shows."""
        return {"folder": self.folder, "files": listing_identity(self.folder, self._paths())}

    def _paths(self) -> list[Path]:
        root = Path(self.folder)
        if not root.is_dir():
            raise ValueError(f"{root}: not a folder")
        return sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)

    def count(self) -> int:
        return len(self._paths())

    def images(self) -> Iterator[tuple[str, Image.Image]]:
        paths = self._paths()
        if not paths:
            raise ValueError(f"{self.folder}: no images ({', '.join(IMAGE_SUFFIXES)})")
        for path in paths:
            yield path.relative_to(self.folder).as_posix(), decode(path.read_bytes(), str(path))

    def images_of(self, ids: set[str]) -> dict[str, Image.Image]:
        paths = {i: Path(self.folder) / i for i in ids}
        return {i: decode(p.read_bytes(), str(p)) for i, p in paths.items() if p.is_file()}


@dataclass(frozen=True)
class DatasetSource:
    """A hub dataset id, a parquet file/folder or a save_to_disk folder, with an image column."""

    dataset: str
    split: str = "test"
    image_column: str = "image"
    id_column: str | None = None  # None: the row number
    label: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dataset", absolute(self.dataset))

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        path = Path(self.dataset)
        return path.stem if path.exists() else self.dataset.rstrip("/").replace("/", "__")

    @property
    def description(self) -> str:
        return f"dataset {self.dataset} split {self.split} column {self.image_column}"

    def _rows(self) -> datasets.Dataset:
        rows = loaders.read_rows(self.dataset, self.split)
        for column in (self.image_column, self.id_column):
            if column is not None and column not in rows.column_names:
                raise ValueError(f"{self.dataset}: no column {column!r} (columns: {', '.join(rows.column_names)})")
        return rows

    def count(self) -> int:
        return len(self._rows())

    def fingerprint(self) -> dict:
        def loaded() -> str:
            return self._rows()._fingerprint

        columns = {"split": self.split, "image_column": self.image_column, "id_column": self.id_column}
        return {**columns, **local_or_hub(self.dataset, loaded)}

    def _ids(self, rows: datasets.Dataset) -> list[str]:
        return [str(v) for v in rows[self.id_column]] if self.id_column else [str(i) for i in range(len(rows))]

    def images_of(self, ids: set[str]) -> dict[str, Image.Image]:
        rows = self._rows()
        wanted = [i for i, row_id in enumerate(self._ids(rows)) if row_id in ids]
        chosen = rows.select(wanted)
        return dict(zip(self._ids(chosen), chosen[self.image_column], strict=True))

    def images(self) -> Iterator[tuple[str, Image.Image]]:
        rows = self._rows()
        ids = self._ids(rows)
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.dataset}: column {self.id_column!r} repeats ids")
        for number, (row_id, row) in enumerate(zip(ids, rows.select_columns([self.image_column]), strict=True)):
            image = row[self.image_column]
            if not isinstance(image, Image.Image):
                raise ValueError(f"{self.dataset}: row {number}: column {self.image_column!r} is not an image")
            yield row_id, image


EvalSource = BenchmarkSource | FolderSource | DatasetSource
KINDS = {"benchmark": BenchmarkSource, "folder": FolderSource, "dataset": DatasetSource}


def spec_of(source: EvalSource) -> dict:
    """What a scan summary records, so later readers (the report) can open the same eval set."""
    kind = next(name for name, cls in KINDS.items() if isinstance(source, cls))
    return {"kind": kind, **asdict(source)}


def from_spec(spec: dict) -> EvalSource:
    fields = dict(spec)
    kind = fields.pop("kind", None)
    if kind not in KINDS:
        raise ValueError(f"unknown eval source kind {kind!r}")
    return KINDS[kind](**fields)


def eval_sources(
    benchmarks: dict[str, str | None],
    folders: list[str],
    dataset_sources: list[str],
    split: str = "test",
    image_column: str = "image",
    id_column: str | None = None,
) -> list[EvalSource]:
    """Every eval set of one scan: benchmarks (name -> local copy, None for lmms-eval's hub id), image
    folders and datasets' image columns. Refused when there is none, or when two would write the same
    output files (they are named after the set)."""
    sources: list[EvalSource] = [BenchmarkSource(name, copy) for name, copy in benchmarks.items()]
    sources += [FolderSource(folder) for folder in folders]
    sources += [
        DatasetSource(dataset=name, split=split, image_column=image_column, id_column=id_column)
        for name in dataset_sources
    ]
    if not sources:
        raise ValueError("nothing to scan: no benchmark, image folder or dataset given")
    names = [source.name for source in sources]
    if len(set(names)) < len(names):
        raise ValueError(
            f"two eval sets would both be written as {names} in one output folder; scan them into separate folders"
        )
    return sources
