"""Index mode: a faiss index of a fixed corpus for repeated scans, its candidates re-scored exactly.

Building an index costs minutes per million vectors; it pays off only when many eval sets are
scanned against one corpus. An approximate index (IVF, PQ, HNSW) proposes `candidates` rows per
eval vector; their exact cosines are then computed from the stored vectors, so every similarity
reported is exact. What an index cannot give: a candidate it never proposes. The exact scan stays
the default; `matches_above_threshold` here counts among the candidates (a lower bound).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus.scan import DEFAULT_CHUNK, TopK
from lmms_contam.corpus.shards import EmbeddingShard, open_corpus
from lmms_contam.fingerprint import file_identity

INDEX_FILE, MANIFEST_FILE = "faiss.index", "index.json"
TRAIN_SAMPLE = 200_000


@dataclass(frozen=True)
class IndexManifest:
    factory: str
    recipe: dict
    shards: list[list]  # [name, rows, content sha256] in corpus order: the index's ids are the corpus's global ids
    trained_on: int

    @classmethod
    def read(cls, folder: Path) -> IndexManifest:
        path = folder / MANIFEST_FILE
        if not path.is_file():
            raise ValueError(f"{folder}: no {MANIFEST_FILE}; build the index with `lmms-contam index-corpus`")
        return cls(**json.loads(path.read_text()))


@dataclass(frozen=True)
class IndexSettings:
    folder: str | None = None  # default <corpus>/index
    candidates: int = 100  # rows proposed per eval vector, then re-scored exactly
    nprobe: int = 32  # inverted lists visited (IVF indexes)


def _faiss():
    try:
        import faiss
    except ImportError as exc:
        raise ValueError("index mode needs faiss-cpu: pip install 'lmms-contam[scale]'") from exc
    return faiss


def _shard_list(shards: list[EmbeddingShard]) -> list[list]:
    """Each shard by name, rows and a hash of its bytes (fingerprint.file_identity): a shard whose vectors
    changed under the same name and shape is another corpus state."""
    return [[s.name, s.rows, file_identity(s.vectors)["sha256"]] for s in shards]


def _rows(shard: EmbeddingShard, rows: slice) -> np.ndarray:
    """Rows of a memory-mapped shard as float32 (only those rows are read)."""
    vectors = np.load(shard.vectors, mmap_mode="r", allow_pickle=False)
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def build_index(corpus: str | Path, factory: str = "IVF1024,Flat", out: str | Path | None = None) -> Path:
    """Train on an even sample of the corpus, add every shard in order; write index and manifest atomically."""
    faiss = _faiss()
    shards, recipe = open_corpus(corpus)
    out = Path(out) if out else Path(corpus) / "index"
    total = sum(s.rows for s in shards)
    dim = _rows(shards[0], slice(0, 1)).shape[1]
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    trained_on = 0
    if not index.is_trained:
        step = max(1, total // TRAIN_SAMPLE)
        sample = np.concatenate([_rows(s, slice((-s.offset) % step, None, step)) for s in shards])
        index.train(sample)
        trained_on = len(sample)
    for shard in shards:
        for start in range(0, shard.rows, DEFAULT_CHUNK):
            index.add(_rows(shard, slice(start, start + DEFAULT_CHUNK)))
    manifest = IndexManifest(factory=factory, recipe=asdict(recipe), shards=_shard_list(shards), trained_on=trained_on)
    with atomic_path(out / INDEX_FILE) as tmp:
        faiss.write_index(index, str(tmp))
    with atomic_path(out / MANIFEST_FILE) as tmp:
        tmp.write_text(json.dumps(asdict(manifest), indent=2))
    return out


def _exact(
    eval_vectors: np.ndarray, shards: list[EmbeddingShard], candidates: np.ndarray, k: int, count_above: float
) -> TopK:
    """Exact cosines of each eval vector's candidates, read from the memory-mapped shards, best k kept."""
    starts = np.array([s.offset for s in shards])
    valid = candidates >= 0
    owner = np.searchsorted(starts, np.where(valid, candidates, 0), side="right") - 1
    sims = np.full(candidates.shape, -np.inf, dtype=np.float32)
    for number, shard in enumerate(shards):
        mask = valid & (owner == number)
        if mask.any():
            unique, inverse = np.unique(candidates[mask] - shard.offset, return_inverse=True)
            rows = np.asarray(np.load(shard.vectors, mmap_mode="r", allow_pickle=False)[unique], dtype=np.float32)
            sims[mask] = np.einsum("ij,ij->i", eval_vectors[np.nonzero(mask)[0]], rows[inverse])
    ids = np.where(valid, candidates, -1).astype(np.int64)
    if ids.shape[1] < k:
        pad = TopK.empty(len(ids), k - ids.shape[1])
        sims, ids = np.concatenate([sims, pad.sims], 1), np.concatenate([ids, pad.ids], 1)
    order = np.lexsort((ids, -sims), axis=1)[:, :k]  # as the exact scan breaks ties: smaller id first
    above = (sims > count_above).sum(axis=1).astype(np.int64)
    return TopK(np.take_along_axis(sims, order, axis=1), np.take_along_axis(ids, order, axis=1), above)


def search_index(
    eval_vectors: np.ndarray, corpus: str | Path, k: int, count_above: float, settings: IndexSettings = IndexSettings()
) -> tuple[TopK, dict]:
    """Top-k by exact cosine among the index's candidates per eval vector, and a description of the mode;
    refuses an index built from another state of the corpus."""
    faiss = _faiss()
    shards, recipe = open_corpus(corpus)
    folder = Path(settings.folder) if settings.folder else Path(corpus) / "index"
    manifest = IndexManifest.read(folder)
    if manifest.shards != _shard_list(shards) or manifest.recipe != asdict(recipe):
        raise ValueError(
            f"{folder}: built from another state of {corpus} (shards or recipe differ); rebuild it "
            "with `lmms-contam index-corpus`"
        )
    index = faiss.read_index(str(folder / INDEX_FILE))
    if "IVF" in manifest.factory:
        faiss.ParameterSpace().set_index_parameter(index, "nprobe", settings.nprobe)
    queries = np.ascontiguousarray(eval_vectors, dtype=np.float32)
    _, proposed = index.search(queries, max(settings.candidates, k))
    mode = {
        "kind": "faiss index, candidates re-scored exactly",
        "factory": manifest.factory,
        "index": str(folder.resolve()),
        "candidates": max(settings.candidates, k),
        "nprobe": settings.nprobe,
        "matches_above_threshold": "counted among the candidates (a lower bound)",
    }
    return _exact(queries, shards, proposed, k, count_above), mode
