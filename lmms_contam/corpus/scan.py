"""Exact streaming top-k: every eval vector against every corpus vector, one shard at a time.

The eval matrix stays in memory; corpus shards (.npy, float16 or float32, read straight from the
disk by reader.py) stream through it in chunks, each multiplied a cache-sized tile at a time and
screened into a running top-k per eval vector (lmms_contam/corpus/screen.py). The products are
float32, or faster int8 (int8.py) or float16 ones whose every entry that could matter is recomputed
exactly. Each shard's result is saved on its own, so a rerun skips finished shards and shards can
run anywhere (in-process or as Ray tasks) before one merge. No index, no approximation.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus.reader import ShardRows, reader, shard_rows
from lmms_contam.corpus.row_checks import check_rows
from lmms_contam.corpus.runners import LocalRunner, RayRunner
from lmms_contam.fingerprint import array_sha256, digest, file_identity

DEFAULT_K = 10
DEFAULT_CHUNK = 32_768  # corpus rows read, cast and checked at a time (exact products then run in tiles)
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
        return cls(
            np.full((n_eval, k), -np.inf, dtype=np.float32),
            np.full((n_eval, k), -1, dtype=np.int64),
            np.zeros(n_eval, dtype=np.int64),
        )


def merge(a: TopK, b: TopK) -> TopK:
    """The best k of two partial results (ties broken by the smaller corpus id, so order never matters)."""
    k = a.sims.shape[1]
    sims = np.concatenate([a.sims, b.sims], axis=1)
    ids = np.concatenate([a.ids, b.ids], axis=1)
    order = np.lexsort((ids, -sims), axis=1)[:, :k]
    return TopK(np.take_along_axis(sims, order, axis=1), np.take_along_axis(ids, order, axis=1), a.above + b.above)


UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}  # the device precisions
PRECISIONS = ("float32", "int8", *UNIT_ROUNDOFF)


def resolve_precision(precision: str, device: str) -> str:
    """`auto`: the fastest exact mode for `device`: int8 on a CPU with oneDNN (else float32), float16 on
    an accelerator. Every mode gives the exact scan's results."""
    if precision != "auto":
        return precision
    if device != "cpu":
        return "float16"
    from lmms_contam.corpus.int8 import available

    return "int8" if available() else "float32"


def rounding_bound(precision: str, dim: int) -> float:
    """Largest |reduced - exact| cosine of two unit vectors: both rounded (2u), fp32 accumulation (d * 2^-24),
    doubled for safety."""
    return 2 * (2 * UNIT_ROUNDOFF[precision] + dim * 2.0**-24)


def _finite_block(rows: np.ndarray, first_id: int):
    """Corpus rows (ids from first_id) as a float32 torch tensor, refused if any holds NaN or inf or is not of
    unit length (row_checks).

    Torch casts (float16 shards, as LAION's) and sums on every core, numpy on one. A memory-mapped
    float32 shard is only viewed, never copied (torch warns that it could write to it: it does not).
    """
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        block = torch.from_numpy(np.ascontiguousarray(rows)).float()
    squares = torch.linalg.vector_norm(block, dim=1) ** 2  # NaN or inf anywhere in a row makes it non-finite
    check_rows(~torch.isfinite(squares).numpy(), squares.numpy(), first_id)
    return block


def _finite_rows(rows: np.ndarray, first_id: int) -> np.ndarray:
    """_finite_block as a numpy array, for the reduced-precision products' exact re-check."""
    return _finite_block(rows, first_id).numpy()


ROW_BLOCK = 8192  # eval rows per tile at most, so that tiles stay wide enough for an efficient product
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


@functools.cache
def tile_bytes() -> int:
    """Products per tile: twice the level-2 caches of the cores that screen them, between 1 and 32 MiB, so
    the screen reads a tile from L2 right after its product rather than from L3 or memory."""
    per_core = 1 << 20  # where Linux does not say
    for index in CPU_CACHES.glob("index*"):
        with contextlib.suppress(OSError, ValueError):
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip()
                per_core = int(size.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(size[-1:], 0)
    return min(max(2 * per_core * len(os.sched_getaffinity(0)), 1 << 20), 32 << 20)


def tile_layout(n_eval: int) -> tuple[list[tuple[int, int]], int]:
    """Eval row blocks of at most ROW_BLOCK rows, and the corpus rows per tile (a multiple of 64) that
    keeps a tile of float32 products within tile_bytes()."""
    edges = np.linspace(0, n_eval, -(-n_eval // ROW_BLOCK) + 1).astype(int)
    row_blocks = list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
    widest = max(stop - start for start, stop in row_blocks)
    return row_blocks, max(1, tile_bytes() // 4 // widest // 64) * 64


class ProductTiles:
    """Products of the eval rows with a corpus block, a cache-sized tile at a time, into one reused buffer."""

    def __init__(self, eval_rows: np.ndarray):
        import torch

        self.row_blocks, self.width = tile_layout(len(eval_rows))
        widest = max(stop - start for start, stop in self.row_blocks)
        self.buffer = torch.empty(widest * self.width)  # torch's allocation: products into numpy's ran slower
        self.eval_rows = torch.from_numpy(eval_rows)

    def __call__(self, block) -> Iterator[tuple[int, int, int, np.ndarray]]:
        """(first eval row, last, first block row, the tile's products) for each tile of a torch block."""
        import torch

        for first, last in self.row_blocks:
            for column in range(0, len(block), self.width):
                columns = min(self.width, len(block) - column)
                tile = self.buffer[: (last - first) * columns].view(last - first, columns)
                torch.mm(self.eval_rows[first:last], block[column : column + columns].T, out=tile)
                yield first, last, column, tile.numpy()


@dataclass
class ScanProfile:
    """Where a scan's time goes, for `bench-scan`'s breakdown: seconds per phase, and how many entries the
    reduced-precision products could not decide and were recomputed exactly."""

    seconds: dict[str, float] = field(default_factory=dict)
    recomputed: int = 0


class PhaseClock:
    """Adds the seconds of each phase to a ScanProfile; with none, timing costs nothing."""

    def __init__(self, profile: ScanProfile | None) -> None:
        self.profile = profile

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if self.profile is None:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            self.profile.seconds[phase] = self.profile.seconds.get(phase, 0.0) + time.perf_counter() - start

    def timed(self, phase: str, items: Iterator) -> Iterator:
        """The items of an iterator, the time spent producing each counted in `phase`."""
        if self.profile is None:
            yield from items
            return
        while True:
            with self(phase):
                item = next(items, None)
            if item is None:
                return
            yield item


READS = "reads (waiting for the disk)"
CASTS = "casts and finiteness checks"
QUANTIZATION = "float16 decoding and quantization"  # and finiteness checks


def _row_chunks(corpus: np.ndarray | ShardRows, chunk: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) over an array, or over a shard file read straight from the disk (reader.py)."""
    if isinstance(corpus, ShardRows):
        yield from reader().chunks(corpus, chunk)
        return
    for start in range(0, len(corpus), chunk):
        yield start, corpus[start : start + chunk]


def _blocks(
    corpus: np.ndarray | ShardRows, chunk: int, offset: int, clock: PhaseClock, prepare, phase: str
) -> Iterator:
    """(first row, prepare(rows, their first global id)) for each chunk of the corpus, the wait for its rows
    timed as READS and `prepare` as `phase` (which reads too where rows are memory-mapped: their page faults)."""
    chunks = _row_chunks(corpus, chunk)
    while True:
        with clock(READS):
            item = next(chunks, None)
        if item is None:
            return
        with clock(phase):
            prepared = prepare(item[1], offset + item[0])
        yield item[0], prepared


def _scan_exact(
    queries: np.ndarray, corpus: np.ndarray | ShardRows, chunk: int, offset: int, best: TopK, count_above, clock
):
    """float32 products tile by tile, each screened into the running top-k right after its product,
    while still in cache. Global ids are written as they are found: no per-chunk merge."""
    from lmms_contam.corpus.screen import screen_tile

    tiles = ProductTiles(queries)
    for start, block in _blocks(corpus, chunk, offset, clock, _finite_block, CASTS):
        for first, last, column, tile in clock.timed("float32 products", tiles(block)):
            with clock("screening"):
                screen_tile(
                    tile,
                    offset + start + column,
                    best.sims[first:last],
                    best.ids[first:last],
                    best.above[first:last],
                    count_above,
                )


def _scan_int8(
    queries: np.ndarray, corpus: np.ndarray | ShardRows, chunk: int, offset: int, best: TopK, count_above, clock
):
    """Integer products tile by tile (int8.py), every entry they cannot rule out recomputed exactly. Each
    chunk is read, decoded and quantized in one pass (int8.quantize)."""
    from lmms_contam.corpus.int8 import tiles_for
    from lmms_contam.corpus.screen import screen_int8_tile, seed_floors

    recomputed = np.zeros(len(queries), dtype=np.int64)
    seeds = np.full(best.sims.shape, -np.inf, dtype=np.float32)
    with tiles_for(queries, *tile_layout(len(queries))) as tiles:
        chunks = _blocks(corpus, chunk, offset, clock, tiles.quantize_corpus, QUANTIZATION)
        for start, (quantized, bounds) in chunks:
            for first, last, column, tile in clock.timed("integer products", tiles(quantized)):
                with clock("screening and exact recomputation"):
                    if start == column == 0:  # the first tile of each row block
                        seed_floors(tile, bounds, tiles.eval_bounds[:, first:last], seeds[first:last])
                    screen_int8_tile(
                        tile,
                        bounds[:, column:],
                        offset + start + column,
                        quantized.rows[column:],
                        tiles.eval_bounds[:, first:last],
                        queries[first:last],
                        best.sims[first:last],
                        best.ids[first:last],
                        best.above[first:last],
                        count_above,
                        recomputed[first:last],
                        seeds[first:last, -1],
                    )
    if clock.profile is not None:
        clock.profile.recomputed += int(recomputed.sum())


def _reduced_chunk(
    queries: np.ndarray, reduced, block: np.ndarray, k: int, count_above: float, precision: str, device: str
) -> TopK:
    """Top-k of one chunk from a reduced-precision product, with every entry that could be in the exact
    top-k or above the threshold re-checked in float32: the result is the exact one."""
    import torch

    eps = rounding_bound(precision, block.shape[1])
    sims = (reduced @ torch.from_numpy(block).to(device, reduced.dtype).T).float()
    kth = torch.topk(sims, min(k, sims.shape[1]), dim=1).values[:, -1:]
    # An exact top-k entry reads at least (reduced k-th best - 2 eps); a match above t reads above t - eps.
    rows, cols = torch.nonzero((sims >= kth - 2 * eps) | (sims > count_above - eps), as_tuple=True)
    rows, cols = rows.cpu().numpy(), cols.cpu().numpy()
    exact = np.einsum("ij,ij->i", queries[rows], block[cols])
    order = np.lexsort((cols, -exact, rows))
    rows, cols, exact = rows[order], cols[order], exact[order]
    first = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
    rank = np.arange(len(rows)) - np.repeat(first, np.diff(np.r_[first, len(rows)]))
    keep = rank < k
    result = TopK.empty(len(queries), k)
    result.sims[rows[keep], rank[keep]] = exact[keep]
    result.ids[rows[keep], rank[keep]] = cols[keep]
    return TopK(
        result.sims, result.ids, np.bincount(rows, weights=exact > count_above, minlength=len(queries)).astype(np.int64)
    )


def scan_matrix(
    eval_vectors: np.ndarray,
    corpus: np.ndarray | ShardRows,
    offset: int,
    k: int = DEFAULT_K,
    chunk: int = DEFAULT_CHUNK,
    count_above: float = 0.9,
    precision: str = "float32",
    device: str = "cpu",
    profile: ScanProfile | None = None,
) -> TopK:
    """Top-k of eval_vectors (n, d) against corpus rows (m, d), whose global ids start at `offset`.

    `precision` int8 computes the products in 8-bit integers on the CPU (int8.py), float16/bfloat16 in
    that precision on `device` (a GPU's fast path); both recompute in float32 or better every entry that
    could be in the top-k or above the threshold, so results stay exact. `profile` collects where the
    scan's time goes (bench-scan's breakdown).
    """
    if eval_vectors.ndim != 2 or corpus.ndim != 2 or eval_vectors.shape[1] != corpus.shape[1]:
        raise ValueError(f"dimension mismatch: eval {eval_vectors.shape}, corpus {corpus.shape}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    queries = np.ascontiguousarray(eval_vectors, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(queries).all(axis=1))
    if len(bad):
        raise ValueError(f"eval vector {bad[0]} holds NaN or infinite values")
    if precision == "int8" and device != "cpu":
        raise ValueError(f"precision int8 runs on the CPU, not {device}; use float16 or bfloat16 there")
    if precision in ("float32", "int8"):
        best, clock = TopK.empty(len(queries), k), PhaseClock(profile)
        if len(queries):
            kernel = _scan_exact if precision == "float32" else _scan_int8
            kernel(queries, corpus, chunk, offset, best, count_above, clock)
        return best
    import torch

    reduced = torch.from_numpy(queries).to(device, getattr(torch, precision))
    best, clock = TopK.empty(len(queries), k), PhaseClock(profile)
    for start, block in _blocks(corpus, chunk, offset, clock, _finite_rows, CASTS):
        with clock(f"{precision} products and exact re-check"):
            found = _reduced_chunk(queries, reduced, block, k, count_above, precision, device)
        ids = np.where(found.ids >= 0, found.ids + offset + start, -1)
        if found.sims.shape[1] < k:
            pad = TopK.empty(len(queries), k - found.sims.shape[1])
            found = TopK(np.concatenate([found.sims, pad.sims], 1), np.concatenate([ids, pad.ids], 1), found.above)
        else:
            found = TopK(found.sims, ids, found.above)
        best = merge(best, found)
    return best


def save(result: TopK, path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, sims=result.sims, ids=result.ids, above=result.above)


def load_topk(path: Path) -> TopK:
    with np.load(path, allow_pickle=False) as data:
        return TopK(data["sims"], data["ids"], data["above"])


def _scan_shard(eval_vectors: np.ndarray, job: tuple) -> TopK:
    """One shard's top-k; a module-level function so Ray workers can import it. Its rows are read straight
    from the disk, the next chunk while this one is scanned, and the first chunk of the shard the runner
    takes next while this one's last is (reader.py)."""
    path, offset, k, chunk, count_above, precision, device, next_path = job
    try:
        corpus = shard_rows(path, next_path)
        return scan_matrix(eval_vectors, corpus, offset, k, chunk, count_above, precision, device)
    except (ValueError, OSError) as exc:  # a damaged shard: say which file (rows are global ids)
        raise ValueError(f"{path}: {exc}") from exc


def shard_key(
    path: str | Path,
    offset: int,
    eval_sha256: str,
    k: int,
    count_above: float,
    precision: str,
    inputs: dict | None = None,
) -> str:
    """Everything a shard's saved result was computed from: the shard file itself (not its name), its
    global offset, the eval vectors, k, the threshold, the precision and the caller's `inputs` (the
    corpus recipe)."""
    return digest(
        {
            "shard": file_identity(path),
            "offset": offset,
            "eval_sha256": eval_sha256,
            "k": k,
            "threshold": count_above,
            "precision": precision,
            "inputs": inputs or {},
        }
    )


def next_paths(paths: list[str | Path], in_order: bool) -> list[str | None]:
    """For each shard, the one scanned after it in the same process, whose first chunk is read ahead: only
    where jobs run one after another here (a Ray worker does not know which shard it gets next)."""
    return [str(path) if in_order else None for path in paths[1:]] + [None] if paths else []


def scan_shards(
    eval_vectors: np.ndarray,
    shards: Iterable[tuple[str, Path, int]],
    work: Path,
    k: int = DEFAULT_K,
    chunk: int = DEFAULT_CHUNK,
    count_above: float = 0.9,
    runner: LocalRunner | RayRunner | None = None,
    precision: str = "float32",
    device: str = "cpu",
    inputs: dict | None = None,
) -> TopK:
    """Scan (name, .npy path, global offset) shards on `runner` (default in-process), then merge.

    Each shard's result is saved as it arrives under a key of everything it depends on (shard_key), so
    a rerun skips the shards whose inputs are unchanged and scans again any that changed.
    """
    shards = list(shards)
    queries = np.ascontiguousarray(eval_vectors, np.float32)
    eval_sha256 = array_sha256(queries)
    done = {
        name: work / f"{name}.{shard_key(path, offset, eval_sha256, k, count_above, precision, inputs)[:20]}.topk.npz"
        for name, path, offset in shards
    }
    todo = [(name, path, offset) for name, path, offset in shards if not done[name].exists()]
    runner = runner or LocalRunner()
    following = next_paths([path for _, path, _ in todo], runner.in_order)
    jobs = [
        (str(path), offset, k, chunk, count_above, precision, device, next_path)
        for (_, path, offset), next_path in zip(todo, following, strict=True)
    ]
    results = runner.imap(_scan_shard, queries, jobs, labels=[name for name, _, _ in todo])
    for index, result in tqdm(results, total=len(jobs), desc="scanning shards", unit="shard", disable=len(jobs) < 2):
        save(result, done[todo[index][0]])
    total = TopK.empty(len(eval_vectors), k)
    for name, _, _ in shards:
        total = merge(total, load_topk(done[name]))
    return total


def rates(result: TopK, thresholds: Iterable[float] = THRESHOLDS) -> dict[float, float]:
    """Share of eval vectors whose best corpus cosine exceeds each threshold."""
    best = result.sims[:, 0]
    return {float(t): float(np.mean(best > t)) for t in thresholds}
