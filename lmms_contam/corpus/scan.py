"""Exact streaming top-k: every eval vector against every corpus vector, one shard at a time.

The eval matrix stays in memory; corpus shards (memory-mapped .npy, float16 or float32) stream
through it in chunks, one matrix product per chunk, keeping a running top-k per eval vector. Each
shard's result is saved on its own, so a rerun skips finished shards and shards can run anywhere
(in-process or as Ray tasks) before one merge. No index, no approximation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus.runners import LocalRunner, RayRunner

DEFAULT_K = 10
DEFAULT_CHUNK = 65_536
THRESHOLDS = (0.8, 0.85, 0.9, 0.95, 0.99)
SCAN_VERSION = 1  # of the written matches and summary


def ids_sha256(ids: list[str]) -> str:
    """A scan's fingerprint of its eval set, its ids in order: later stages refuse another version."""
    return hashlib.sha256("\x1f".join(ids).encode()).hexdigest()


@dataclass(frozen=True)
class TopK:
    """Per eval vector: the k highest cosines and their global corpus row ids, best first, and how
    many corpus rows in all exceeded the counting threshold (duplicated corpora match many times)."""

    sims: np.ndarray  # (n_eval, k) float32; -inf where a corpus held fewer than k rows
    ids: np.ndarray  # (n_eval, k) int64; -1 where empty
    above: np.ndarray  # (n_eval,) int64

    @classmethod
    def empty(cls, n_eval: int, k: int) -> TopK:
        return cls(np.full((n_eval, k), -np.inf, dtype=np.float32), np.full((n_eval, k), -1, dtype=np.int64),
                   np.zeros(n_eval, dtype=np.int64))  # fmt: skip


def merge(a: TopK, b: TopK) -> TopK:
    """The best k of two partial results (ties broken by the smaller corpus id, so order never matters)."""
    k = a.sims.shape[1]
    sims = np.concatenate([a.sims, b.sims], axis=1)
    ids = np.concatenate([a.ids, b.ids], axis=1)
    order = np.lexsort((ids, -sims), axis=1)[:, :k]
    return TopK(np.take_along_axis(sims, order, axis=1), np.take_along_axis(ids, order, axis=1), a.above + b.above)


def scan_matrix(eval_vectors: np.ndarray, corpus: np.ndarray, offset: int, k: int = DEFAULT_K,
                chunk: int = DEFAULT_CHUNK, count_above: float = 0.9) -> TopK:  # fmt: skip
    """Top-k of eval_vectors (n, d) against corpus rows (m, d), whose global ids start at `offset`."""
    if eval_vectors.ndim != 2 or corpus.ndim != 2 or eval_vectors.shape[1] != corpus.shape[1]:
        raise ValueError(f"dimension mismatch: eval {eval_vectors.shape}, corpus {corpus.shape}")
    import torch  # its top-k is ~20x numpy's argpartition on these shapes, which would dominate the scan

    queries = np.ascontiguousarray(eval_vectors, dtype=np.float32)
    best = TopK.empty(len(queries), k)
    for start in range(0, len(corpus), chunk):
        block = np.asarray(corpus[start : start + chunk], dtype=np.float32)
        row_sums = block.sum(axis=1)  # one pass: NaN or inf anywhere in a row makes its sum non-finite
        if not np.isfinite(row_sums).all():
            bad = start + int(np.argmax(~np.isfinite(row_sums)))
            raise ValueError(f"corpus row {offset + bad} holds NaN or infinite values")
        sims = queries @ block.T
        take = min(k, sims.shape[1])
        values, positions = torch.topk(torch.from_numpy(sims), take, dim=1)
        top_sims, top_ids = values.numpy(), positions.numpy().astype(np.int64) + offset + start
        if take < k:
            pad = TopK.empty(len(queries), k - take)
            top_sims, top_ids = np.concatenate([top_sims, pad.sims], 1), np.concatenate([top_ids, pad.ids], 1)
        # Only rows whose best match clears the threshold can count any: usually a handful.
        above = np.zeros(len(queries), dtype=np.int64)
        hot = np.flatnonzero(top_sims[:, 0] > count_above)
        above[hot] = (sims[hot] > count_above).sum(axis=1)
        best = merge(best, TopK(top_sims, top_ids, above))
    return best


def save(result: TopK, path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, sims=result.sims, ids=result.ids, above=result.above)


def load(path: Path) -> TopK:
    with np.load(path, allow_pickle=False) as data:
        return TopK(data["sims"], data["ids"], data["above"])


def _scan_shard(eval_vectors: np.ndarray, job: tuple[str, int, int, int, float]) -> TopK:
    """One shard's top-k; a module-level function so Ray workers can import it."""
    path, offset, k, chunk, count_above = job
    corpus = np.load(path, mmap_mode="r", allow_pickle=False)
    return scan_matrix(eval_vectors, corpus, offset, k, chunk, count_above)


def scan_shards(eval_vectors: np.ndarray, shards: Iterable[tuple[str, Path, int]], work: Path,
                k: int = DEFAULT_K, chunk: int = DEFAULT_CHUNK, count_above: float = 0.9,
                runner: LocalRunner | RayRunner | None = None) -> TopK:  # fmt: skip
    """Scan (name, .npy path, global offset) shards on `runner` (default in-process), then merge.

    Each shard's result is saved as it arrives; saved shards are not scanned again.
    """
    shards = list(shards)
    done = {name: work / f"{name}.k{k}.above{count_above}.topk.npz" for name, _, _ in shards}
    todo = [(name, path, offset) for name, path, offset in shards if not done[name].exists()]
    jobs = [(str(path), offset, k, chunk, count_above) for _, path, offset in todo]
    results = (runner or LocalRunner()).imap(_scan_shard, np.ascontiguousarray(eval_vectors, np.float32), jobs)
    for index, result in tqdm(results, total=len(jobs), desc="scanning shards", unit="shard", disable=len(jobs) < 2):
        save(result, done[todo[index][0]])
    total = TopK.empty(len(eval_vectors), k)
    for name, _, _ in shards:
        total = merge(total, load(done[name]))
    return total


def rates(result: TopK, thresholds: Iterable[float] = THRESHOLDS) -> dict[float, float]:
    """Share of eval vectors whose best corpus cosine exceeds each threshold."""
    best = result.sims[:, 0]
    return {float(t): float(np.mean(best > t)) for t in thresholds}
