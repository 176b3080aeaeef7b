"""`lmms-contam scan`: embed an eval set's images, scan a corpus, write per-image matches and rates."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets
import numpy as np
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.corpus import scan
from lmms_contam.corpus.embed import Embedder, EmbeddingRecipe, read_embeddings, require_same_recipe, write_embeddings
from lmms_contam.corpus.eval_sources import EvalSource, spec_of
from lmms_contam.corpus.index import IndexSettings, search_index
from lmms_contam.corpus.runners import LocalRunner, RayRunner
from lmms_contam.corpus.shards import EmbeddingShard, lookup, open_corpus
from lmms_contam.fingerprint import digest


@dataclass(frozen=True)
class ScanSummary:
    """One eval set's scan, as written to <out>/<name>.summary.json."""

    scan_version: int
    benchmark: str  # the eval set's name (a benchmark, a folder, a dataset)
    corpus: str
    corpus_rows: int
    images: int
    threshold: float
    k: int
    image_only_rate: float  # share of images with a corpus match above the threshold
    rates: dict[str, float]  # the same at the thresholds of the sweep
    recipe: dict
    eval_source: str
    eval: dict  # how to open the eval set again (eval_sources.from_spec)
    eval_ids_sha256: str
    mode: dict  # exact scan or index search, and how


EVAL_CHUNK = 256  # images decoded and held at once while an eval set is embedded


def eval_embeddings(source: EvalSource, embedder, work: Path) -> tuple[np.ndarray, list[str]]:
    """The eval images' vectors, computed once and reused only while the source's content and the
    embedding recipe are the same (the file is named by their digest; a stale one is removed).

    Images are decoded a chunk at a time: SEEDBench's 14k images would not fit in memory at once.
    """
    key = digest({"source": source.fingerprint(), "recipe": asdict(embedder.recipe)})[:20]
    path = work / f"eval-{key}.npy"
    if path.exists():
        vectors, ids, _ = read_embeddings(path)
        return np.asarray(vectors), ids
    ids, chunks, images = [], [], []
    for image_id, image in tqdm(source.images(), total=source.count(), desc=f"embedding {source.name}", unit="row"):
        ids.append(image_id)
        images.append(image)
        if len(images) == EVAL_CHUNK:
            chunks.append(embedder.embed(images))
            images = []
    if images:
        chunks.append(embedder.embed(images))
    vectors = np.concatenate(chunks) if chunks else embedder.embed([])
    write_embeddings(path, vectors, ids, embedder.recipe)
    for stale in work.glob("eval[-.]*"):
        if not stale.name.startswith(path.stem):
            stale.unlink()
    return vectors, ids


def _exact_scan(
    vectors: np.ndarray,
    shards: list[EmbeddingShard],
    corpus_recipe: EmbeddingRecipe,
    work: Path,
    *,
    k: int,
    threshold: float,
    runner: LocalRunner | RayRunner,
    precision: str,
    scan_device: str,
) -> tuple[scan.TopK, dict]:
    """The exact streaming scan, shaped like search_index's (result, mode) so the summary records either alike."""
    precision = scan.resolve_precision(precision, scan_device)
    result = scan.scan_shards(
        vectors,
        [(s.name, s.vectors, s.offset) for s in shards],
        work,
        k=k,
        count_above=threshold,
        runner=runner,
        precision=precision,
        device=scan_device,
        inputs={"corpus_recipe": asdict(corpus_recipe)},
    )
    mode = {
        "kind": "exact streaming scan",
        "runner": runner.name,
        "precision": precision,
        # Shards whose worker or node died mid-scan, scanned again: {"job": shard name, "lost": error}.
        "resubmitted_after_a_lost_worker": list(runner.resubmitted),
    }
    return result, mode


def _match_rows(ids: list[str], result: scan.TopK, evidence: list[dict], k: int) -> list[dict]:
    """One matches-file row per eval image, so a reader sees each image's top-k with its captions and urls."""
    rows = []
    for row, original_id in enumerate(ids):
        matches = evidence[row * k : (row + 1) * k]
        rows.append(
            {
                "original_id": original_id,
                "max_similarity": float(result.sims[row, 0]),
                "matches_above_threshold": int(result.above[row]),
                "top_ids": result.ids[row].tolist(),
                "top_similarities": result.sims[row].tolist(),
                "top_captions": [m["caption"] for m in matches],
                "top_urls": [m["url"] for m in matches],
            }
        )
    return rows


def scan_source(
    source: EvalSource,
    corpus: str | Path,
    out: str | Path,
    embedder: Embedder,
    threshold: float,
    k: int = scan.DEFAULT_K,
    runner: LocalRunner | RayRunner | None = None,
    index: IndexSettings | None = None,
    precision: str = "auto",
    scan_device: str = "cpu",
) -> ScanSummary:
    """`threshold`: a cosine on the embedder's scale (its config's standard one unless the user says); `runner`
    None: in-process (a RayRunner scans the shards as Ray tasks); `index`: search a faiss index of the
    corpus instead of the exact scan, re-scoring its candidates exactly; `precision` (scan.PRECISIONS or
    auto, the fastest for `scan_device`): the products' precision, re-checked exactly where it could matter."""
    runner = runner or LocalRunner()
    out = Path(out)
    shards, corpus_recipe = open_corpus(corpus)
    require_same_recipe(embedder.recipe, corpus_recipe, f"{source.name} against {corpus}")
    # Keyed on the source's description: another local copy of a benchmark gets its own cache.
    work = out / "work" / f"{source.name}-{hashlib.sha256(source.description.encode()).hexdigest()[:12]}"
    vectors, ids = eval_embeddings(source, embedder, work)
    if index is None:
        result, mode = _exact_scan(
            vectors,
            shards,
            corpus_recipe,
            work,
            k=k,
            threshold=threshold,
            runner=runner,
            precision=precision,
            scan_device=scan_device,
        )
    else:
        result, mode = search_index(vectors, corpus, k, threshold, index)
    rows = _match_rows(ids, result, lookup(shards, result.ids), k)
    sweep = sorted({*scan.THRESHOLDS, threshold})
    summary = ScanSummary(
        scan_version=scan.SCAN_VERSION,
        benchmark=source.name,
        corpus=str(Path(corpus).resolve()),
        corpus_rows=sum(s.rows for s in shards),
        images=len(ids),
        threshold=threshold,
        k=k,
        image_only_rate=scan.rates(result, [threshold])[threshold],
        rates={str(t): r for t, r in scan.rates(result, sweep).items()},
        recipe=asdict(embedder.recipe),
        eval_source=source.description,
        eval=spec_of(source),
        eval_ids_sha256=scan.ids_sha256(ids),
        mode=mode,
    )
    with atomic_path(out / f"{source.name}.matches.parquet") as tmp:
        datasets.Dataset.from_list(rows).to_parquet(str(tmp))
    with atomic_path(out / f"{source.name}.summary.json") as tmp:
        tmp.write_text(json.dumps(asdict(summary), indent=2) + "\n")
    return summary
