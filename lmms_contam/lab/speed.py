"""`lmms-contam bench-scan`: the scan's speed and memory as ratios to baselines measured in the same run.

These machines are noisy, so every figure is a ratio to something timed here on the same data, the
two sides of a ratio run next to each other in each of five rounds; a figure is the round with the
median ratio, and every round's ratio is shown beside it:
  - scan throughput / the bare float32 matrix products of the same shapes (target >= 0.7);
  - scan throughput / faiss IndexFlatIP searching the same vectors (target >= 1.0);
  both for the float32 scan and the int8 one (where torch has oneDNN), whose results are the same;
  - embedding pipeline (decode + resize + forward) / the model's forward on pre-decoded tensors (>= 0.9);
  - embed once + scan / the seed's per-pair recipe (embed both images of every pair), timed on a few
    pairs and extrapolated (>= 1000);
  - peak memory scanning a corpus 4x larger, shard by shard, / the smaller one (flat: ~1).
"""

from __future__ import annotations

import functools
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
import numpy as np

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus import int8, scan
from lmms_contam.corpus.reader import shard_rows
from lmms_contam.corpus.screen import GROUP, exact_cosine


@dataclass(frozen=True)
class Figure:
    name: str
    ours: float
    baseline: float
    unit: str
    target: float | None  # minimum of ours / baseline (for memory: maximum); None: measured, not a goal
    higher_is_better: bool = True
    rounds: tuple[float, ...] = ()  # every round's ratio; ours and baseline are the median round's

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline

    @property
    def meets_target(self) -> bool | None:
        if self.target is None:
            return None
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target


def _unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@dataclass(frozen=True, kw_only=True)
class ClipLike:
    """Unit vectors shaped like CLIP image embeddings, not spread evenly over the sphere: every vector leans on
    one shared mean direction and on one of `clusters` centroids, so two unrelated images sit at cosine about
    `shared`, two of one cluster at about `shared + cluster` (CLIP ViT-L/14 image pairs: roughly 0.4-0.5 and
    0.6-0.8), and a `planted` share of the eval vectors each get `copies` near-copies in the corpus at cosines
    spread evenly over threshold +- `band`, where the scan's exact recheck has the most to do."""

    shared: float = 0.45
    cluster: float = 0.25
    clusters: int = 200
    planted: float = 0.05
    copies: int = 3
    threshold: float = 0.9
    band: float = 0.05
    seed: int = 0  # of the mean and the centroids, shared by the eval set and the corpus

    def rows(self, rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
        mean, centroids = _directions(self.seed, self.clusters, dim)
        noise = 1.0 - self.shared - self.cluster
        rows = (
            np.sqrt(self.shared) * mean
            + np.sqrt(self.cluster) * centroids[rng.integers(0, self.clusters, n)]
            + np.sqrt(noise) * _unit_vectors(rng, n, dim)
        )
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    def near_copies(self, queries: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """`copies` vectors at exact cosines spread over threshold +- band for each planted eval vector."""
        planted = queries[: int(round(self.planted * len(queries)))]
        source = np.repeat(planted, self.copies, axis=0)
        cosines = rng.uniform(self.threshold - self.band, self.threshold + self.band, len(source))
        other = _unit_vectors(rng, len(source), queries.shape[1])
        other -= np.sum(other * source, axis=1, keepdims=True) * source  # orthogonal to its eval vector
        other /= np.linalg.norm(other, axis=1, keepdims=True)
        return (cosines[:, None] * source + np.sqrt(1 - cosines**2)[:, None] * other).astype(np.float32)


@functools.lru_cache(maxsize=4)
def _directions(seed: int, clusters: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The shared mean and the cluster centroids: drawn once, not once per shard."""
    rng = np.random.default_rng(seed)
    return _unit_vectors(rng, 1, dim)[0], _unit_vectors(rng, clusters, dim)


def corpus_rows(listed: list[tuple[str, Path, int]]) -> int:
    """Rows in listed shards: the last one's offset plus its length."""
    return listed[-1][2] + len(np.load(listed[-1][1], mmap_mode="r"))


def eval_vectors(vectors: str, n: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(2)
    return ClipLike().rows(rng, n, dim) if vectors == "clip-like" else _unit_vectors(rng, n, dim)


def write_shards(
    folder: Path,
    n: int,
    dim: int,
    shards: int,
    seed: int,
    dtype: str = "float16",
    vectors: str = "random",
    queries: np.ndarray | None = None,
) -> list[tuple[str, Path, int]]:
    """`n` unit vectors (`vectors`: random, or clip-like with near-copies of `queries` planted at rows spread
    over the corpus) in .npy shards of `dtype`, written a shard at a time."""
    rng, listed, offset = np.random.default_rng(seed), [], 0
    model = ClipLike()
    copies = model.near_copies(queries, rng) if vectors == "clip-like" and queries is not None else None
    at = rng.choice(n, size=len(copies), replace=False) if copies is not None else np.empty(0, int)
    folder.mkdir(parents=True, exist_ok=True)
    for number, rows in enumerate(np.array_split(np.arange(n), shards)):
        path = folder / f"img_emb_{number}.npy"
        block = model.rows(rng, len(rows), dim) if vectors == "clip-like" else _unit_vectors(rng, len(rows), dim)
        inside = (at >= offset) & (at < offset + len(rows))
        if copies is not None:
            block[at[inside] - offset] = copies[inside]
        np.save(path, block.astype(dtype))
        listed.append((path.stem, path, offset))
        offset += len(rows)
    return listed


def _timed_rounds(*functions: Callable[[int], object], repeats: int = 5) -> list[np.ndarray]:
    """Seconds of every run of each function. The functions take turns in every round (each is given
    its round number, for a fresh output folder), in reverse order every other round, so that the two
    sides of a ratio run next to each other on a machine whose speed drifts over minutes. Each runs once
    untimed first (round number `repeats`): compiling kernels (numba caches them per machine), building
    cached tiles and faulting in buffers belong to no round."""
    for function in functions:
        function(repeats)
    seconds: list[list[float]] = [[] for _ in functions]
    for run in range(repeats):
        order = range(len(functions)) if run % 2 == 0 else reversed(range(len(functions)))
        for i in order:
            start = time.perf_counter()
            functions[i](run)
            seconds[i].append(time.perf_counter() - start)
    return [np.array(times) for times in seconds]


def compared(name: str, ours: np.ndarray, baseline: np.ndarray, work: float, unit: str, target: float | None) -> Figure:
    """Throughputs (`work` / seconds) of the round whose ratio is the median of all rounds' ratios.

    Each side's fastest run, the usual summary of one timing, can pair moments minutes apart on a
    machine whose speed drifts by more than the gaps being measured (README: the scan's figures).
    """
    ratios = baseline / ours
    middle = int(np.argsort(ratios, kind="stable")[len(ratios) // 2])
    return Figure(
        name=name,
        ours=float(work / ours[middle]),
        baseline=float(work / baseline[middle]),
        unit=unit,
        target=target,
        rounds=tuple(ratios.tolist()),
    )


def _tile_products(queries: np.ndarray, shards: list[np.ndarray]) -> Callable[[int], None]:
    """The scan's own products (same chunks and tiles, into its reused buffer) without the screening."""
    import torch

    tiles = scan.ProductTiles(queries)
    chunks = [
        torch.from_numpy(shard[i : i + scan.DEFAULT_CHUNK])
        for shard in shards
        for i in range(0, len(shard), scan.DEFAULT_CHUNK)
    ]

    def products(_: int) -> None:
        for chunk in chunks:
            for _tile in tiles(chunk):
                pass

    return products


def _device_products(queries: np.ndarray, shards: list[np.ndarray], device: str, precision: str):
    """The reduced-precision products alone on `device`, the corpus already there in the scan's chunks: what
    the scan would cost if reading, checking and screening were free."""
    import torch

    dtype = getattr(torch, precision)
    reduced = torch.from_numpy(queries).to(device, dtype)
    chunks = [
        torch.from_numpy(shard[i : i + scan.DEFAULT_CHUNK]).to(device, dtype)
        for shard in shards
        for i in range(0, len(shard), scan.DEFAULT_CHUNK)
    ]

    def products(_: int) -> None:
        for chunk in chunks:
            reduced @ chunk.T
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return products


def scan_figures(
    queries: np.ndarray,
    listed: list[tuple[str, Path, int]],
    k: int,
    work: Path,
    device: str = "cpu",
    precisions: tuple[str, ...] | None = None,
) -> tuple[list[Figure], float, ScanCheck]:
    """Scans vs their bare products vs faiss on the same vectors: on the CPU float32 and int8 (where it runs)
    against float32 tiles; on an accelerator its precision (`scan --precision auto`) against its own products
    there, faiss staying on the CPU. Also returns the faster scan's seconds and its check against float64
    brute force."""
    try:
        import faiss
    except ImportError as exc:
        raise ValueError("the faiss baseline needs faiss-cpu: pip install 'lmms-contam[scale]'") from exc

    shards_f32 = [np.load(path).astype(np.float32) for _, path, _ in listed]  # in RAM, untimed, for baselines
    n_corpus = sum(len(shard) for shard in shards_f32)
    index = faiss.IndexFlatIP(queries.shape[1])
    for shard in shards_f32:
        index.add(shard)
    if precisions is None:
        cpu = ("float32", *(["int8"] if int8.available() else []))
        precisions = cpu if device == "cpu" else (scan.resolve_precision("auto", device),)
    reduced = next((precision for precision in precisions if precision in scan.UNIT_ROUNDOFF), None)
    products = (
        _device_products(queries, shards_f32, device, reduced) if reduced else _tile_products(queries, shards_f32)
    )
    *scan_seconds, gemm_seconds, faiss_seconds = _timed_rounds(
        *[_scan(queries, listed, k, work / precision, precision, device) for precision in precisions],
        products,
        lambda _: index.search(queries, k),
    )
    figures = []
    for precision, seconds in zip(precisions, scan_seconds, strict=True):
        figures += [
            compared(
                f"{precision} scan vs matrix products alone", seconds, gemm_seconds, n_corpus, "corpus vectors/s", 0.7
            ),
            compared(
                f"{precision} scan vs faiss IndexFlatIP",
                seconds,
                faiss_seconds,
                n_corpus,
                "corpus vectors/s",
                2.0 if precision == scan.resolve_precision("auto", device) else 1.0,
            ),
        ]
    fastest = min(zip(scan_seconds, precisions, strict=True), key=lambda pair: float(np.median(pair[0])))[1]
    check = check_scan(queries, listed, shards_f32, k, fastest, device)
    return figures, min(float(np.median(seconds)) for seconds in scan_seconds), check


@dataclass(frozen=True)
class ScanCheck:
    """One more scan, untimed for the ratios: where its time went and its result against float64 brute force."""

    precision: str
    profile: scan.ScanProfile
    exact: bool
    detail: str
    recompute_seconds: float | None = None  # the recomputed entries at the pace of a sample timed apart

    def lines(self) -> list[str]:
        seconds = self.profile.seconds
        total = sum(seconds.values())
        lines = [f"{self.precision} scan, where the time goes ({total:.2f} s in all):"]
        lines += [f"  {phase:<40} {spent:8.3f} s  {100 * spent / total:5.1f}%" for phase, spent in seconds.items()]
        if self.precision != "float32":
            lines.append(f"  {'entries recomputed exactly':<40} {self.profile.recomputed:>10,}")
        if self.recompute_seconds is not None:
            share = 100 * self.recompute_seconds / total
            lines.append(
                f"  {'recomputing them, estimated':<40} {self.recompute_seconds:8.3f} s  {share:5.1f}%"
                f"  (that count at the pace of {SAMPLED_PAIRS:,} timed alone)"
            )
        return [*lines, f"exact against float64 brute force: {'yes' if self.exact else 'NO'} ({self.detail})"]


def brute_force_float64(queries: np.ndarray, shards: list[np.ndarray], k: int) -> scan.TopK:
    """The top-k in float64, a shard at a time: the reference the scan must equal."""
    total = scan.TopK.empty(len(queries), k)
    reference = queries.astype(np.float64)
    offset = 0
    for shard in shards:
        wide = shard.astype(np.float64)
        for start in range(0, len(reference), 512):
            sims = reference[start : start + 512] @ wide.T
            top = np.argpartition(-sims, min(k, sims.shape[1]) - 1, axis=1)[:, :k]  # merge() orders them
            part = scan.TopK(
                np.take_along_axis(sims, top, axis=1).astype(np.float32),
                top + offset,
                np.zeros(len(sims), dtype=np.int64),
            )
            rows = slice(start, start + len(sims))
            merged = scan.merge(scan.TopK(total.sims[rows], total.ids[rows], total.above[rows]), part)
            total.sims[rows], total.ids[rows] = merged.sims, merged.ids
        offset += len(shard)
    return total


def check_scan(
    queries: np.ndarray,
    listed: list[tuple[str, Path, int]],
    shards: list[np.ndarray],
    k: int,
    precision: str,
    device: str = "cpu",
) -> ScanCheck:
    """Where the scan's time goes, and its ids and cosines against float64 brute force: every similarity within
    1e-5, and every id the reference ranks above its k-th best by more than that found."""
    profile = scan.ScanProfile()
    found = scan.TopK.empty(len(queries), k)
    following = scan.next_paths([path for _, path, _ in listed], in_order=True)
    for (_, path, offset), next_path in zip(listed, following, strict=True):
        corpus = shard_rows(path, next_path)  # read as scan_shards reads it
        found = scan.merge(
            found, scan.scan_matrix(queries, corpus, offset, k, precision=precision, device=device, profile=profile)
        )
    truth = brute_force_float64(queries, shards, k)
    worst = float(np.max(np.abs(found.sims - truth.sims)))
    clear = truth.sims > truth.sims[:, -1:] + 1e-5
    missed = sum(len(set(truth.ids[r][clear[r]]) - set(found.ids[r])) for r in range(len(queries)))
    detail = f"largest cosine difference {worst:.2e}, {missed} id(s) missed of {int(clear.sum())} clear of ties"
    estimate = recompute_seconds(queries, shards[0], profile.recomputed) if profile.recomputed else None
    return ScanCheck(
        precision=precision,
        profile=profile,
        exact=worst <= 1e-5 and missed == 0,
        detail=detail,
        recompute_seconds=estimate,
    )


SAMPLED_PAIRS = 100_000
HITS_PER_ROW = 5  # eval rows recomputed against one corpus row, about what CLIP-like vectors give


@numba.njit(nogil=True, parallel=True, cache=True)
def _recompute(queries: np.ndarray, rows: np.ndarray, eval_rows: np.ndarray, out: np.ndarray) -> None:
    for c in numba.prange(rows.shape[0]):
        for j in range(eval_rows.shape[1]):
            out[c, j] = exact_cosine(queries[eval_rows[c, j]], rows[c])


def recompute_seconds(queries: np.ndarray, corpus: np.ndarray, entries: int) -> float:
    """About how long `entries` exact recomputations take inside the int8 screen, which cannot time them
    apart from the screening around them: SAMPLED_PAIRS recomputed with its own kernel (screen.exact_cosine),
    each corpus row against HITS_PER_ROW eval rows of one screening group, as the screen meets them."""
    rng = np.random.default_rng(0)
    n_rows = SAMPLED_PAIRS // HITS_PER_ROW
    rows = np.ascontiguousarray(corpus[rng.integers(0, len(corpus), n_rows)], dtype=np.float32)
    groups = rng.integers(0, -(-len(queries) // GROUP), n_rows)[:, None] * GROUP
    eval_rows = np.minimum(groups + rng.integers(0, GROUP, (n_rows, HITS_PER_ROW)), len(queries) - 1)
    out = np.empty(eval_rows.shape, np.float32)
    _recompute(queries[:1], rows[:1], np.zeros((1, 1), np.int64), out[:1, :1])  # compiled before the clock
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        _recompute(queries, rows, eval_rows, out)
        best = min(best, time.perf_counter() - start)
    return best * entries / eval_rows.size


def _scan(
    queries: np.ndarray, listed: list[tuple[str, Path, int]], k: int, work: Path, precision: str, device: str = "cpu"
) -> Callable[[int], object]:
    return lambda run: scan.scan_shards(queries, listed, work / f"run{run}", k=k, precision=precision, device=device)


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache (written back first), so the next read comes from the disk."""
    for path in paths:
        handle = os.open(path, os.O_RDONLY)
        try:
            os.fsync(handle)
            os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(handle)


def _read_plainly(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(8 << 20):
                pass


def io_figures(
    queries: np.ndarray,
    listed: list[tuple[str, Path, int]],
    k: int,
    precision: str,
    work: Path,
    repeats: int = 3,
    device: str = "cpu",
) -> list[Figure]:
    """The scan with the shards' pages evicted first against the same scan with them cached, and the read rate
    the cold scan achieved against a plain sequential read of the same files evicted the same way (a `dd`)."""
    paths = [path for _, path, _ in listed]
    megabytes = sum(path.stat().st_size for path in paths) / 1e6
    cold, warm, plain = [], [], []
    for run in range(repeats):
        for seconds, before, function in (
            (plain, True, lambda _: _read_plainly(paths)),
            (cold, True, _scan(queries, listed, k, work / "cold", precision, device)),
            (warm, False, _scan(queries, listed, k, work / "warm", precision, device)),
        ):
            if before:
                evict(paths)
            start = time.perf_counter()
            function(run)
            seconds.append(time.perf_counter() - start)
    cold, warm, plain = np.array(cold), np.array(warm), np.array(plain)
    n_corpus = corpus_rows(listed)
    return [
        compared(
            "cold scan (shard pages evicted first) vs warm scan", cold, warm, n_corpus, "corpus vectors/s", 1 / 1.1
        ),
        compared("read rate of the cold scan vs a plain sequential read", cold, plain, megabytes, "MB/s", None),
    ]


def _photos(n: int) -> list[bytes]:
    """JPEG bytes of real photos (skimage ships them), cycled and resized to vary."""
    try:
        import skimage.data
    except ImportError as exc:
        raise ValueError("the embedding figures use scikit-image's photos: pip install scikit-image") from exc
    from PIL import Image

    names = ("astronaut", "chelsea", "coffee", "rocket", "horse", "camera", "coins", "page")
    photos = []
    for i in range(n):
        image = Image.fromarray(np.asarray(getattr(skimage.data, names[i % len(names)])())).convert("RGB")
        image = image.resize((256 + 16 * (i % 8), 256 + 8 * (i % 5)))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        photos.append(buffer.getvalue())
    return photos


def embedding_figures(
    embedder, n_images: int, n_eval: int, n_corpus: int, scan_seconds: float, work: Path
) -> list[Figure]:
    """Pipeline vs embedding pre-decoded, prepared inputs (the model alone, for any embedder); embed-once + scan
    vs the per-pair recipe."""
    from PIL import Image

    from lmms_contam.corpus.ingest import embed_corpus

    folder = work / "images"
    folder.mkdir(parents=True, exist_ok=True)
    photos = _photos(n_images)
    for i, data in enumerate(photos):
        (folder / f"{i:05d}.jpg").write_bytes(data)
    prepared = [embedder.prepare(Image.open(io.BytesIO(d))) for d in photos]

    def forward(_: int) -> None:
        embedder.embed_prepared(prepared)

    pipeline_seconds, forward_seconds = _timed_rounds(
        lambda run: embed_corpus(folder, work / f"embedded{run}", embedder, shard_size=n_images), forward
    )
    pairs = min(8, n_images // 2)
    images = [Image.open(io.BytesIO(d)).convert("RGB") for d in photos[: 2 * pairs]]

    def per_pair(_: int) -> None:  # the seed's recipe: embed both images of a pair, then one cosine
        for i in range(pairs):
            a, b = embedder.embed(images[2 * i : 2 * i + 2])
            float(a.astype(np.float32) @ b.astype(np.float32))

    pair_seconds = float(np.median(_timed_rounds(per_pair, repeats=3)[0])) / pairs
    ours = (n_eval + n_corpus) * float(np.median(pipeline_seconds)) / n_images + scan_seconds
    return [
        compared("embedding pipeline vs forward alone", pipeline_seconds, forward_seconds, n_images, "images/s", 0.9),
        Figure(
            name=f"embed once + scan vs per-pair recipe ({n_eval} x {n_corpus} pairs, extrapolated)",
            ours=1 / ours,
            baseline=1 / (pair_seconds * n_eval * n_corpus),
            unit="jobs/s",
            target=1000.0,
        ),
    ]


def peak_memory_kib(n_eval: int, corpus: Path, dim: int, k: int, precision: str = "float32") -> int:
    """Peak RSS of a fresh process while it scans the shards in `corpus` (KiB). A small scan loads torch and
    the compiled kernels first; where Linux allows it, the peak is then reset (/proc/self/clear_refs), so the
    figure is the scan's peak, not the imports'."""
    code = (
        "import json, resource, sys, tempfile\nimport numpy as np\nfrom pathlib import Path\n"
        "from lmms_contam.corpus import scan\n"
        "n_eval, folder, dim, k = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n"
        "precision = sys.argv[5]\n"
        "listed, offset = [], 0\n"
        "for path in sorted(folder.glob('img_emb_*.npy'), key=lambda p: int(p.stem.split('_')[-1])):\n"
        "    rows = len(np.load(path, mmap_mode='r'))\n"
        "    listed.append((path.stem, path, offset))\n"
        "    offset += rows\n"
        "queries = np.random.default_rng(2).standard_normal((n_eval, dim)).astype(np.float32)\n"
        "warm = np.eye(2, dim, dtype=np.float32)\n"
        "scan.scan_matrix(warm, np.eye(64, dim, dtype=np.float32), 0, k=min(k, 64), precision=precision)\n"
        "try:\n"
        "    Path('/proc/self/clear_refs').write_text('5')\n"
        "except OSError:\n"
        "    pass\n"
        "scan.scan_shards(queries, listed, Path(tempfile.mkdtemp()), k=k, precision=precision)  # nothing reused\n"
        "status = Path('/proc/self/status')\n"
        "peaks = [line.split()[1] for line in status.read_text().splitlines() if line.startswith('VmHWM')]\n"
        "print(json.dumps(int(peaks[0]) if peaks else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(n_eval), str(corpus), str(dim), str(k), precision],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def memory_figure(n_eval: int, n_corpus: int, dim: int, k: int, work: Path) -> Figure:
    """Same shard size both times (4 shards, then 16): what grows is only the number of shards."""
    write_shards(work / "mem1", n_corpus, dim, 4, seed=3)
    write_shards(work / "mem4", 4 * n_corpus, dim, 16, seed=4)
    before = peak_memory_kib(n_eval, work / "mem1", dim, k)
    after = peak_memory_kib(n_eval, work / "mem4", dim, k)
    return Figure(
        name="peak memory, 4x corpus vs 1x (shards streamed)",
        ours=after / 1024,
        baseline=before / 1024,
        unit="MiB",
        target=1.15,
        higher_is_better=False,
    )


@dataclass(frozen=True)
class Measured:
    figures: list[Figure]
    check: ScanCheck


def measure(
    n_eval: int,
    n_corpus: int,
    dim: int,
    shards: int,
    k: int,
    n_images: int,
    embedder,
    dtype: str = "float16",
    vectors: str = "random",
    scan_device: str = "cpu",
) -> Measured:
    """Every figure; `dtype` is how the corpus shards are stored (float16 as LAION's, or float32), `scan_device`
    where the scan's products run (an accelerator's show whether reading the shards is what bounds it)."""
    with tempfile.TemporaryDirectory(prefix="lmms-contam-bench-") as folder:
        work = Path(folder)
        queries = eval_vectors(vectors, n_eval, dim)
        listed = write_shards(
            work / "corpus", n_corpus, dim, shards, seed=1, dtype=dtype, vectors=vectors, queries=queries
        )
        figures, scan_seconds, check = scan_figures(queries, listed, k, work, scan_device)
        figures += io_figures(queries, listed, k, check.precision, work, device=scan_device)
        figures += embedding_figures(embedder, n_images, n_eval, n_corpus, scan_seconds, work)
        figures.append(memory_figure(n_eval, n_corpus, dim, k, work))
    return Measured(figures=figures, check=check)


@dataclass(frozen=True)
class GrowthPoint:
    axis: str  # "corpus" or "eval": which one grew
    scale: int
    n_eval: int
    n_corpus: int
    seconds: float  # median of the rounds
    peak_mib: float  # peak RSS of a fresh process running the same scan


SCALES = (1, 2, 4)


def growth(
    n_eval: int, n_corpus: int, dim: int, shards: int, k: int, work: Path, vectors: str = "random", repeats: int = 3
) -> list[GrowthPoint]:
    """The scan at 1x, 2x and 4x the corpus (more shards of the same size) and 1x, 2x and 4x the eval set, the
    sizes of one axis taking turns in every round; peak memory of each from a fresh process."""
    precision = scan.resolve_precision("auto", "cpu")
    queries = {scale: eval_vectors(vectors, scale * n_eval, dim) for scale in SCALES}
    corpora = {
        scale: write_shards(
            work / f"corpus{scale}",
            scale * n_corpus,
            dim,
            scale * shards,
            seed=scale,
            vectors=vectors,
            queries=queries[1],
        )
        for scale in SCALES
    }
    points = []
    for axis in ("corpus", "eval"):
        sized = [(queries[1], corpora[s]) if axis == "corpus" else (queries[s], corpora[1]) for s in SCALES]
        seconds = _timed_rounds(
            *[
                _scan(q, listed, k, work / f"{axis}{s}", precision)
                for (q, listed), s in zip(sized, SCALES, strict=True)
            ],
            repeats=repeats,
        )
        for scale, (q, listed), times in zip(SCALES, sized, seconds, strict=True):
            peak = peak_memory_kib(len(q), listed[0][1].parent, dim, k, precision) / 1024
            n = corpus_rows(listed)
            points.append(
                GrowthPoint(
                    axis=axis, scale=scale, n_eval=len(q), n_corpus=n, seconds=float(np.median(times)), peak_mib=peak
                )
            )
    return points


def exponents(points: list[GrowthPoint]) -> dict[str, float]:
    """Per axis, the slope of log(seconds) on log(size): 1.0 is linear growth."""
    slopes = {}
    for axis in ("corpus", "eval"):
        along = [p for p in points if p.axis == axis]
        slopes[axis] = float(np.polyfit(np.log([p.scale for p in along]), np.log([p.seconds for p in along]), 1)[0])
    return slopes


def growth_kind(slope: float) -> str:
    """Linear within 10%; below, cheaper than linear (work done once per corpus chunk, whatever the eval
    size, is spread over more eval rows); above, a cost that outgrows the data."""
    if abs(slope - 1) <= 0.1:
        return "linear, within 10% of 1"
    return "sub-linear" if slope < 1 else "SUPER-LINEAR"


def growth_table(points: list[GrowthPoint]) -> str:
    lines = [f"{'grown':<8} {'scale':>5} {'eval':>8} {'corpus':>10} {'seconds':>9} {'peak MiB':>9}"]
    lines += [
        f"{p.axis:<8} {p.scale:>5} {p.n_eval:>8} {p.n_corpus:>10} {p.seconds:>9.3f} {p.peak_mib:>9.1f}" for p in points
    ]
    slopes = exponents(points)
    flat = max(p.peak_mib for p in points if p.axis == "corpus") / min(p.peak_mib for p in points if p.axis == "corpus")
    lines.append(
        "time grows as size^e: "
        + ", ".join(f"{axis} e = {slope:.2f} ({growth_kind(slope)})" for axis, slope in slopes.items())
        + f"; peak memory, 4x corpus / 1x: {flat:.2f}"
    )
    return "\n".join(lines)


def plot_growth(points: list[GrowthPoint], path: Path) -> None:
    """Seconds and peak memory against the scale of each axis, on log-log axes beside a linear guide."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(9, 3.6))
    for axis, marker in (("corpus", "o"), ("eval", "s")):
        along = [p for p in points if p.axis == axis]
        scales = [p.scale for p in along]
        time_axes.loglog(scales, [p.seconds for p in along], marker=marker, label=f"{axis} grown")
        memory_axes.semilogx(scales, [p.peak_mib for p in along], marker=marker, label=f"{axis} grown")
        first = along[0].seconds
        time_axes.loglog(scales, [first * s for s in scales], linestyle=":", color="grey")
    time_axes.set(xlabel="size (x the smallest)", ylabel="scan seconds", title="time (dotted: linear)")
    memory_axes.set(xlabel="size (x the smallest)", ylabel="peak RSS (MiB)", title="memory", ylim=(0, None))
    for axes in (time_axes, memory_axes):
        axes.set_xticks(list(SCALES), [f"{s}x" for s in SCALES])
        axes.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    plt.close(figure)


def speed_table(figures: list[Figure]) -> str:
    lines = [f"{'measure':<72} {'ours':>12} {'baseline':>12} {'ratio':>7} {'rounds':>11}  target   unit"]
    for f in figures:
        sign = ">=" if f.higher_is_better else "<="
        verdict = "met" if f.meets_target else "NOT met"
        goal = "(measured)" if f.target is None else f"{sign} {f.target:g} ({verdict})"
        spread = f"{min(f.rounds):.3g}-{max(f.rounds):.3g}" if f.rounds else ""
        lines.append(f"{f.name:<72} {f.ours:>12.4g} {f.baseline:>12.4g} {f.ratio:>7.3g} {spread:>11}  {goal}  {f.unit}")
    return "\n".join(lines)


def as_json(figures: list[Figure], settings: dict, check: ScanCheck) -> str:
    return json.dumps(
        {
            "settings": settings,
            "peak_rss_kib_of_this_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "figures": [{**f.__dict__, "ratio": f.ratio, "meets_target": f.meets_target} for f in figures],
            "check": asdict(check),
        },
        indent=2,
    )


def growth_json(points: list[GrowthPoint], settings: dict) -> str:
    return json.dumps(
        {"settings": settings, "points": [p.__dict__ for p in points], "exponents": exponents(points)}, indent=2
    )
