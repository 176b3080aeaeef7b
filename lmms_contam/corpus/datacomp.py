"""DataComp's precomputed features (`<shard>.npz` with b32_img / l14_img arrays beside `<shard>.parquet`
with uid, url and text) into the clip-retrieval layout the scan memory-maps.

`.npz` files are zip archives: they cannot be memory-mapped, and every scan would decompress them
again. A one-time import, one shard at a time and resumable (a shard is converted again when its
files changed), keeps every later scan, index and Ray run on the one layout. DataComp ships no
recipe, so the user names one (see sources.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus.embed import EmbeddingRecipe
from lmms_contam.corpus.shards import (
    CorpusSummary,
    begin_corpus,
    finish_corpus,
    read_recipe,
    remove_shards_from,
    reusable_shard,
    shard_files,
    write_shard,
)
from lmms_contam.fingerprint import digest, file_identity

UNIT_TOLERANCE = 1e-2  # cosines need unit vectors; DataComp's are normalised


def _features(path: Path, key: str) -> np.ndarray:
    with np.load(path, allow_pickle=False) as archive:
        if key not in archive.files:
            raise ValueError(f"{path}: no array {key!r} (arrays: {', '.join(archive.files)})")
        vectors = np.asarray(archive[key], dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"{path}: {key} has shape {vectors.shape}, expected (rows, dim)")
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        raise ValueError(f"{path}: {key} row {int(np.argmax(bad))} holds NaN or infinite values")
    norms = np.linalg.norm(vectors, axis=1)
    if len(norms) and np.abs(norms - 1).max() > UNIT_TOLERANCE:
        row = int(np.argmax(np.abs(norms - 1)))
        raise ValueError(f"{path}: {key} row {row} has norm {norms[row]:.4f}; the scan compares unit vectors")
    return vectors


def _metadata(path: Path, rows: int) -> pa.Table:
    metadata = path.with_suffix(".parquet")
    if not metadata.is_file():
        return pa.table({"caption": [""] * rows, "url": [""] * rows, "uid": [""] * rows, "source": [path.name] * rows})
    table = pq.read_table(metadata)
    if table.num_rows != rows:
        raise ValueError(f"{metadata}: {table.num_rows} rows for {rows} vectors in {path.name}")
    return pa.table(
        {
            "caption": _strings(table, "text"),
            "url": _strings(table, "url"),
            "uid": _strings(table, "uid"),
            "source": [path.name] * rows,
        }
    )


def _strings(table: pa.Table, name: str) -> list[str]:
    if name not in table.column_names:
        return [""] * table.num_rows
    return [str(value or "") for value in table.column(name).to_pylist()]


def shard_inputs(path: Path, key: str, recipe: EmbeddingRecipe) -> str:
    """Digest of what an imported shard is made from: the .npz and its .parquet as files, the array and
    the recipe. A rerun reuses a converted shard only when this is unchanged."""
    metadata = path.with_suffix(".parquet")
    return digest(
        {
            "npz": file_identity(path),
            "parquet": file_identity(metadata) if metadata.is_file() else None,
            "key": key,
            "recipe": asdict(recipe),
        }
    )


def import_datacomp(
    source: str | Path, out: str | Path, recipe_path: str | Path, key: str = "l14_img"
) -> CorpusSummary:
    """Every `<shard>.npz` under `source`, in name order, as img_emb_N.npy + metadata_N.parquet in `out`."""
    source, out = Path(source).resolve(), Path(out).resolve()
    shards = sorted(source.rglob("*.npz"))
    if not shards:
        raise ValueError(f"{source}: no .npz files")
    recipe = read_recipe(Path(recipe_path))
    existing = out / "recipe.json"
    if existing.exists() and read_recipe(existing) != recipe:
        raise ValueError(f"{out}: holds vectors of another recipe")
    with atomic_path(existing) as tmp:
        tmp.write_text(json.dumps(asdict(recipe), indent=2))
    begin_corpus(out)
    counts, dim = {"shards": 0, "shards_reused": 0, "rows": 0}, None
    for number, path in enumerate(tqdm(shards, desc=f"importing {source}", unit="shard")):
        counts["shards"] += 1
        inputs = shard_inputs(path, key, recipe)
        reused = reusable_shard(out, number, inputs) is not None
        target = shard_files(out, number)["vectors"]
        vectors = np.load(target, mmap_mode="r", allow_pickle=False) if reused else _features(path, key)
        if dim is not None and vectors.shape[1] != dim:
            raise ValueError(f"{path}: {key} has dimension {vectors.shape[1]}, earlier shards {dim}")
        dim = vectors.shape[1]
        counts["rows"] += len(vectors)
        if reused:
            counts["shards_reused"] += 1
            continue
        write_shard(
            out,
            number,
            inputs,
            {"source": str(path), "rows": len(vectors)},
            _metadata(path, len(vectors)),
            vectors,
            recipe.dtype,
        )
    summary = CorpusSummary(
        source=str(source),
        out=str(out),
        recipe=asdict(recipe),
        shards=counts["shards"],
        shards_reused=counts["shards_reused"],
        shards_removed=remove_shards_from(out, counts["shards"]),
        vectors=counts["rows"],
        key=key,
    )
    finish_corpus(out, summary)
    return summary
