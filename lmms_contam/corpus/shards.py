"""Precomputed corpus embeddings in the clip-retrieval layout, with the captions that travel with them.

    <corpus>/img_emb/img_emb_0.npy, img_emb_1.npy, ...   (float16/float32, one row per image)
    <corpus>/metadata/metadata_0.parquet, ...             (same rows; caption and url columns)
    <corpus>/recipe.json                                  (how the vectors were made; see embed.EmbeddingRecipe)
    <corpus>/shards/shard_0.json, ...                     (written by embed-corpus and import datacomp:
                                                           the digest of what each shard was made from)
    <corpus>/corpus.json                                  (their summary, written last: without it such a
                                                           folder is an unfinished run and is refused)

Public dumps carry no recipe file, and a cosine means something only between vectors of the same
recipe, so the user writes recipe.json once (e.g. LAION's ViT-L/14 embeddings of 256 px resizes).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus.embed import EmbeddingRecipe

SHARD = re.compile(r"img_emb_(\d+)\.npy")
NEAR_SHARD = re.compile(r"img_emb_\d+\.npy", re.IGNORECASE)  # a shard under another case: not scanned


@dataclass(frozen=True)
class EmbeddingShard:
    name: str
    vectors: Path
    metadata: Path | None
    offset: int  # global id of its first row
    rows: int


def read_recipe(path: Path) -> EmbeddingRecipe:
    """A recipe.json, refused with its name when damaged or of another shape."""
    try:
        return EmbeddingRecipe(**json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError) as exc:  # TypeError: fields another recipe does not have
        raise ValueError(f"{path}: not a valid recipe ({exc})") from exc


def _shard_rows(vectors: Path, metadata: Path | None) -> int:
    """Rows of a shard, checked against its metadata; a damaged file is refused with its name."""
    try:
        array = np.load(vectors, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{vectors}: not a readable .npy array ({exc})") from exc
    if array.dtype.kind != "f" or array.ndim != 2:
        raise ValueError(
            f"{vectors}: {array.dtype} array of shape {array.shape}; a shard holds one float16, float32 or float64 "
            "embedding per row"
        )
    rows = len(array)
    if metadata is not None:
        try:
            described = pq.ParquetFile(metadata).metadata.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise ValueError(f"{metadata}: not a readable parquet file ({exc})") from exc
        if described != rows:
            raise ValueError(f"{metadata}: {described} rows for {rows} vectors")
    return rows


COMPLETE = "corpus.json"


def begin_corpus(corpus: Path) -> None:
    """A run that writes shards starts by withdrawing the mark that the folder is complete."""
    (corpus / COMPLETE).unlink(missing_ok=True)


@dataclass(frozen=True)
class CorpusSummary:
    """What an `embed-corpus` or `import datacomp` run wrote; also the corpus's completion record."""

    source: str
    out: str
    recipe: dict
    shards: int
    shards_reused: int  # unchanged since an earlier run, not made again
    shards_removed: int  # left over from an earlier, longer source
    vectors: int
    skipped: int = 0  # images that could not be decoded (their reasons in <out>/skipped/)
    key: str | None = None  # the array imported from DataComp's .npz files


def finish_corpus(corpus: Path, summary: CorpusSummary) -> None:
    with atomic_path(corpus / COMPLETE) as tmp:
        tmp.write_text(json.dumps(asdict(summary), indent=2) + "\n")


def open_corpus(folder: str | Path) -> tuple[list[EmbeddingShard], EmbeddingRecipe]:
    folder = Path(folder)
    if (folder / "shards").is_dir() and not (folder / COMPLETE).is_file():
        raise ValueError(
            f"{folder}: incomplete: an `embed-corpus` or `import datacomp` run into it did not "
            f"finish (no {COMPLETE}); rerun it (finished shards are reused)"
        )
    recipe_path = folder / "recipe.json"
    if not recipe_path.exists():
        raise ValueError(
            f"{folder}: no recipe.json; write how these vectors were made (model, weights, "
            "preprocessing, dtype) so they are only compared with vectors made the same way"
        )
    recipe = read_recipe(recipe_path)
    vectors_folder = _layout_folder(folder)
    found = sorted((int(m[1]), p) for p in vectors_folder.glob("img_emb_*.npy") if (m := SHARD.fullmatch(p.name)))
    if not found:
        raise ValueError(f"{folder}: no img_emb_N.npy shards")
    numbers = [number for number, _ in found]
    if len(set(numbers)) != len(numbers):
        repeated = next(path for number, path in found if numbers.count(number) > 1)
        raise ValueError(f"{repeated}: another file has the same shard number; one file per number")
    metadata_folder = folder / "metadata" if vectors_folder != folder else folder
    _check_none_missing(folder, numbers, metadata_folder)
    shards, offset = [], 0
    for number, path in found:
        metadata = metadata_folder / f"metadata_{number}.parquet"
        metadata = metadata if metadata.is_file() else None
        rows = _shard_rows(path, metadata)
        shards.append(EmbeddingShard(name=path.stem, vectors=path, metadata=metadata, offset=offset, rows=rows))
        offset += rows
    written = _written_vectors(folder)
    if written is not None and written != offset:
        raise ValueError(
            f"{folder / COMPLETE}: the run that wrote this corpus made {written} vectors, but its shards hold "
            f"{offset}: a shard is missing or was replaced; rerun it"
        )
    return shards, recipe


def _written_vectors(folder: Path) -> int | None:
    """How many vectors the corpus's completion record says were written (None: a dump with no record)."""
    if not (folder / COMPLETE).is_file():
        return None
    try:
        return int(json.loads((folder / COMPLETE).read_text())["vectors"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{folder / COMPLETE}: not a readable completion record ({exc})") from exc


def _check_none_missing(folder: Path, numbers: list[int], metadata_folder: Path) -> None:
    """A shard missing from a corpus lowers every rate without a word: refused where it shows, by metadata
    without its vectors, or (a dump with no completion record) by a gap in the numbering. A corpus that
    `embed-corpus` wrote may skip a number (every image of that shard failed); its record counts vectors."""
    orphans = [
        p
        for p in metadata_folder.glob("metadata_*.parquet")
        if (m := re.fullmatch(r"metadata_(\d+)\.parquet", p.name)) and int(m[1]) not in numbers
    ]
    if orphans and not (folder / COMPLETE).is_file():
        raise ValueError(f"{orphans[0]}: metadata of a shard whose vectors are missing (img_emb_N.npy)")
    gaps = sorted(set(range(max(numbers) + 1)) - set(numbers))
    if gaps and not (folder / COMPLETE).is_file():
        raise ValueError(
            f"{folder}: shard(s) {', '.join(map(str, gaps[:5]))} missing: the numbers run {min(numbers)} to "
            f"{max(numbers)} with gaps; a partly copied corpus would report less contamination than there is"
        )


def _layout_folder(folder: Path) -> Path:
    """Where the corpus's shards are (`img_emb/`, or the folder itself for a flat dump); a file anywhere else
    that looks like a shard (a stray copy in a subfolder, a name in capitals) is refused by name: scanned, it
    would count its matches twice under other ids; left out, its matches would be lost."""
    layout = folder / "img_emb" if (folder / "img_emb").is_dir() else folder
    lookalikes = [p for p in folder.rglob("*") if NEAR_SHARD.fullmatch(p.name)]
    misnamed = [p for p in lookalikes if not SHARD.fullmatch(p.name)]
    if misnamed:
        raise ValueError(f"{misnamed[0]}: looks like a shard but is not named img_emb_N.npy; rename or remove it")
    strays = [p for p in lookalikes if p.parent != layout]
    if strays:
        raise ValueError(
            f"{strays[0]}: a shard outside the corpus's layout ({layout}/img_emb_N.npy); only the layout's own "
            f"shards are scanned: move {'it' if len(strays) == 1 else f'it and {len(strays) - 1} more'} out of "
            f"{folder}"
        )
    first_of: dict[tuple[int, int], Path] = {}
    for shard in sorted(p for p in lookalikes if p.parent == layout):
        found = shard.stat()
        same = first_of.setdefault((found.st_dev, found.st_ino), shard)
        if same != shard:  # a link to another shard: its rows would be counted twice under other ids
            raise ValueError(f"{shard}: the same file as {same} (a link); each shard must be a file of its own")
    return layout


def lookup(shards: list[EmbeddingShard], ids: np.ndarray, columns: tuple[str, ...] = ("caption", "url")) -> list[dict]:
    """Caption and url of each global corpus id (empty strings where a shard has no metadata)."""
    starts = np.array([s.offset for s in shards])
    wanted: dict[int, list[int]] = {}
    for global_id in {int(i) for i in np.asarray(ids).ravel() if i >= 0}:
        wanted.setdefault(int(np.searchsorted(starts, global_id, side="right") - 1), []).append(global_id)
    found: dict[int, dict] = {}
    for index, global_ids in wanted.items():
        shard = shards[index]
        if shard.metadata is None:
            continue
        present = [c for c in columns if c in pq.ParquetFile(shard.metadata).schema_arrow.names]
        table = pq.read_table(shard.metadata, columns=present)
        for global_id in global_ids:
            row = table.slice(global_id - shard.offset, 1).to_pylist()[0]
            found[global_id] = {c: str(row.get(c) or "") for c in columns}
    return [found.get(int(i), dict.fromkeys(columns, "")) for i in np.asarray(ids).ravel()]


def shard_files(corpus: Path, number: int) -> dict[str, Path]:
    """The files of shard `number` of a corpus that this package writes."""
    return {
        "vectors": corpus / "img_emb" / f"img_emb_{number}.npy",
        "metadata": corpus / "metadata" / f"metadata_{number}.parquet",
        "inputs": corpus / "shards" / f"shard_{number}.json",
        "skipped": corpus / "skipped" / f"skipped_{number}.jsonl",
    }


def reusable_shard(corpus: Path, number: int, inputs: str) -> dict | None:
    """A written shard's record, when the shard is complete (its vectors exist) and was made from `inputs`."""
    files = shard_files(corpus, number)
    if not (files["vectors"].exists() and files["inputs"].exists()):
        return None
    record = json.loads(files["inputs"].read_text())
    return record if record.get("inputs_sha256") == inputs else None


def write_shard(
    corpus: Path,
    number: int,
    inputs: str,
    record: dict,
    metadata: pa.Table | None,
    vectors: np.ndarray | None,
    dtype: str,
) -> None:
    """Replace shard `number`: the old vectors go first (they mark a shard done), then the metadata and the
    inputs record, the vectors last, so a crash anywhere leaves a shard that a rerun makes again. Without
    vectors (every image skipped) nothing but the removal happens."""
    files = shard_files(corpus, number)
    files["vectors"].unlink(missing_ok=True)
    if vectors is None:
        return
    with atomic_path(files["metadata"]) as tmp:
        pq.write_table(metadata, tmp)
    with atomic_path(files["inputs"]) as tmp:
        tmp.write_text(json.dumps({"inputs_sha256": inputs, **record}) + "\n")
    with atomic_path(files["vectors"]) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors.astype(dtype), allow_pickle=False)


def remove_shards_from(corpus: Path, first: int) -> int:
    """Files of shards numbered `first` and above, left by an earlier run over a longer source; returns how
    many shards had vectors."""
    removed = 0
    for kind, path in shard_files(corpus, 0).items():
        for found in path.parent.glob(path.name.replace("_0.", "_*.")):
            if int(found.name.split(".")[0].rsplit("_", 1)[1]) >= first:
                removed += kind == "vectors"
                found.unlink()
    return removed
