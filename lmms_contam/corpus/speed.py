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
  - peak memory scanning a corpus 4x larger from memory-mapped shards / the smaller one (flat: ~1).
"""

from __future__ import annotations

import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmms_contam.corpus import int8, scan


@dataclass(frozen=True)
class Figure:
    name: str
    ours: float
    baseline: float
    unit: str
    target: float  # minimum of ours / baseline (for memory: maximum)
    higher_is_better: bool = True
    rounds: tuple[float, ...] = ()  # every round's ratio; ours and baseline are the median round's

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline

    @property
    def meets_target(self) -> bool:
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target


def _unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def write_shards(
    folder: Path, n: int, dim: int, shards: int, seed: int, dtype: str = "float16"
) -> list[tuple[str, Path, int]]:
    """`n` random unit vectors in .npy shards of `dtype`, written a shard at a time."""
    rng, listed, offset = np.random.default_rng(seed), [], 0
    folder.mkdir(parents=True, exist_ok=True)
    for number, rows in enumerate(np.array_split(np.arange(n), shards)):
        path = folder / f"img_emb_{number}.npy"
        np.save(path, _unit_vectors(rng, len(rows), dim).astype(dtype))
        listed.append((path.stem, path, offset))
        offset += len(rows)
    return listed


def _timed_rounds(*functions: Callable[[int], object], repeats: int = 5) -> list[np.ndarray]:
    """Seconds of every run of each function. The functions take turns in every round (each is given
    its round number, for a fresh output folder), in reverse order every other round, so that the two
    sides of a ratio run next to each other on a machine whose speed drifts over minutes."""
    seconds: list[list[float]] = [[] for _ in functions]
    for run in range(repeats):
        order = range(len(functions)) if run % 2 == 0 else reversed(range(len(functions)))
        for i in order:
            start = time.perf_counter()
            functions[i](run)
            seconds[i].append(time.perf_counter() - start)
    return [np.array(times) for times in seconds]


def compared(name: str, ours: np.ndarray, baseline: np.ndarray, work: float, unit: str, target: float) -> Figure:
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


def scan_figures(
    n_eval: int, n_corpus: int, dim: int, shards: int, k: int, work: Path, dtype: str = "float16"
) -> tuple[list[Figure], float]:
    """Scans (float32, and int8 where it runs) vs bare GEMM vs faiss on the same vectors; also returns
    the faster scan's seconds (what `scan --precision auto` runs)."""
    try:
        import faiss
    except ImportError as exc:
        raise ValueError("the faiss baseline needs faiss-cpu: pip install 'lmms-contam[scale]'") from exc

    listed = write_shards(work / "corpus", n_corpus, dim, shards, seed=1, dtype=dtype)
    queries = _unit_vectors(np.random.default_rng(2), n_eval, dim)
    shards_f32 = [np.load(path).astype(np.float32) for _, path, _ in listed]  # in RAM, untimed, for baselines
    index = faiss.IndexFlatIP(dim)
    for shard in shards_f32:
        index.add(shard)
    precisions = ["float32", *(["int8"] if int8.available() else [])]
    *scan_seconds, gemm_seconds, faiss_seconds = _timed_rounds(
        *[_scan(queries, listed, k, work / precision, precision) for precision in precisions],
        _tile_products(queries, shards_f32),
        lambda _: index.search(queries, k),
    )
    figures = []
    for precision, seconds in zip(precisions, scan_seconds, strict=True):
        figures += [
            compared(
                f"{precision} scan vs matrix products alone", seconds, gemm_seconds, n_corpus, "corpus vectors/s", 0.7
            ),
            compared(
                f"{precision} scan vs faiss IndexFlatIP", seconds, faiss_seconds, n_corpus, "corpus vectors/s", 1.0
            ),
        ]
    return figures, min(float(np.median(seconds)) for seconds in scan_seconds)


def _scan(
    queries: np.ndarray, listed: list[tuple[str, Path, int]], k: int, work: Path, precision: str
) -> Callable[[int], object]:
    return lambda run: scan.scan_shards(queries, listed, work / f"run{run}", k=k, precision=precision)


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
    """Pipeline vs forward on pre-decoded tensors; embed-once + scan vs the per-pair recipe."""
    import torch
    from PIL import Image

    from lmms_contam.corpus.ingest import embed_corpus

    folder = work / "images"
    folder.mkdir(parents=True, exist_ok=True)
    photos = _photos(n_images)
    for i, data in enumerate(photos):
        (folder / f"{i:05d}.jpg").write_bytes(data)
    tensors = torch.stack([embedder.prepare(Image.open(io.BytesIO(d))) for d in photos])

    def forward(_: int) -> None:
        with torch.no_grad():
            for start in range(0, n_images, embedder.batch_size):
                embedder.features(tensors[start : start + embedder.batch_size].to(embedder.device))

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


def peak_memory_kib(n_eval: int, corpus: Path, dim: int, k: int) -> int:
    """Peak RSS of a fresh process scanning the shards in `corpus` (KiB, as getrusage reports it)."""
    code = (
        "import json, resource, sys\nimport numpy as np\nfrom pathlib import Path\n"
        "from lmms_contam.corpus import scan\n"
        "n_eval, folder, dim, k = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n"
        "listed, offset = [], 0\n"
        "for path in sorted(folder.glob('img_emb_*.npy'), key=lambda p: int(p.stem.split('_')[-1])):\n"
        "    rows = len(np.load(path, mmap_mode='r'))\n"
        "    listed.append((path.stem, path, offset))\n"
        "    offset += rows\n"
        "queries = np.random.default_rng(2).standard_normal((n_eval, dim)).astype(np.float32)\n"
        "scan.scan_shards(queries, listed, folder / 'work', k=k)\n"
        "print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(n_eval), str(corpus), str(dim), str(k)],
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
        name="peak memory, 4x corpus vs 1x (memory-mapped shards)",
        ours=after / 1024,
        baseline=before / 1024,
        unit="MiB",
        target=1.15,
        higher_is_better=False,
    )


def measure(
    n_eval: int, n_corpus: int, dim: int, shards: int, k: int, n_images: int, embedder, dtype: str = "float16"
) -> list[Figure]:
    """Every figure; `dtype` is how the corpus shards are stored (float16 as LAION's, or float32)."""
    with tempfile.TemporaryDirectory(prefix="lmms-contam-bench-") as folder:
        work = Path(folder)
        figures, scan_seconds = scan_figures(n_eval, n_corpus, dim, shards, k, work, dtype)
        figures += embedding_figures(embedder, n_images, n_eval, n_corpus, scan_seconds, work)
        figures.append(memory_figure(n_eval, n_corpus, dim, k, work))
    return figures


def table(figures: list[Figure]) -> str:
    lines = [f"{'measure':<72} {'ours':>12} {'baseline':>12} {'ratio':>7} {'rounds':>11}  target   unit"]
    for f in figures:
        sign = ">=" if f.higher_is_better else "<="
        verdict = "met" if f.meets_target else "NOT met"
        spread = f"{min(f.rounds):.3g}-{max(f.rounds):.3g}" if f.rounds else ""
        lines.append(
            f"{f.name:<72} {f.ours:>12.4g} {f.baseline:>12.4g} {f.ratio:>7.3g} {spread:>11}  {sign} "
            f"{f.target:g} ({verdict})  {f.unit}"
        )
    return "\n".join(lines)


def as_json(figures: list[Figure], settings: dict) -> str:
    return json.dumps(
        {
            "settings": settings,
            "peak_rss_kib_of_this_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "figures": [{**f.__dict__, "ratio": f.ratio, "meets_target": f.meets_target} for f in figures],
        },
        indent=2,
    )
