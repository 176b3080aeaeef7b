"""`lmms-contam scan`: embed a benchmark's images, scan a corpus, write per-image matches and rates."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import datasets
import numpy as np
from tqdm.auto import tqdm

from lmms_contam.atomic import atomic_path
from lmms_contam.benchmarks import loaders
from lmms_contam.corpus import scan
from lmms_contam.corpus.embed import (
    EfficientNetLite0Embedder,
    OpenClipEmbedder,
    read_embeddings,
    require_same_recipe,
    standard_threshold,
    write_embeddings,
)
from lmms_contam.corpus.sources import lookup, open_corpus
from lmms_contam.items import Item


def make_embedder(spec: str, device: str = "cpu"):
    """'efficientnet-lite0' (offline), or 'open_clip:MODEL/PRETRAINED' (default open_clip:ViT-L-14/openai)."""
    if spec == "efficientnet-lite0":
        return EfficientNetLite0Embedder(device=device)
    if spec.startswith("open_clip:"):
        model, _, pretrained = spec.removeprefix("open_clip:").partition("/")
        return OpenClipEmbedder(model, pretrained or None, device=device)
    raise ValueError(f"unknown embedder {spec!r}: use efficientnet-lite0 or open_clip:MODEL/PRETRAINED")


EVAL_CHUNK = 256  # images decoded and held at once while a benchmark is embedded


def eval_embeddings(benchmark: str, originals: str | None, embedder, work: Path) -> tuple[np.ndarray, list[str]]:
    """The benchmark's image vectors, computed once and reused by reruns with the same recipe.

    Images are decoded a chunk at a time: SEEDBench's 14k images would not fit in memory at once.
    """
    path = work / "eval.npy"
    if path.exists():
        vectors, ids, recipe = read_embeddings(path)
        if recipe == embedder.recipe:
            return np.asarray(vectors), ids
    rows = loaders.load_rows(benchmark, originals)
    ids, chunks, images = [], [], []
    for item in tqdm(loaders.items(benchmark, rows), total=len(rows), desc=f"embedding {benchmark}", unit="row"):
        if isinstance(item, Item):
            ids.append(item.original_id)
            images.append(item.image)
        if len(images) == EVAL_CHUNK:
            chunks.append(embedder.embed(images))
            images = []
    if images:
        chunks.append(embedder.embed(images))
    vectors = np.concatenate(chunks) if chunks else embedder.embed([])
    write_embeddings(path, vectors, ids, embedder.recipe)
    return vectors, ids


def scan_benchmark(benchmark: str, corpus: str | Path, out: str | Path, embedder, originals: str | None = None,
                   k: int = scan.DEFAULT_K, threshold: float | None = None) -> dict:  # fmt: skip
    """`threshold` None: the embedder's standard one (0.9 for CLIP, the offline embedder's own)."""
    out = Path(out)
    threshold = standard_threshold(embedder.recipe.family) if threshold is None else threshold
    shards, corpus_recipe = open_corpus(corpus)
    require_same_recipe(embedder.recipe, corpus_recipe, f"{benchmark} against {corpus}")
    work = out / "work" / benchmark
    vectors, ids = eval_embeddings(benchmark, originals, embedder, work)
    result = scan.scan_shards(vectors, [(s.name, s.vectors, s.offset) for s in shards], work, k=k,
                              count_above=threshold)  # fmt: skip
    evidence = lookup(shards, result.ids)
    rows = []
    for row, original_id in enumerate(ids):
        matches = evidence[row * k : (row + 1) * k]
        rows.append({"original_id": original_id, "max_similarity": float(result.sims[row, 0]),
                     "matches_above_threshold": int(result.above[row]),
                     "top_ids": result.ids[row].tolist(), "top_similarities": result.sims[row].tolist(),
                     "top_captions": [m["caption"] for m in matches],
                     "top_urls": [m["url"] for m in matches]})  # fmt: skip
    sweep = sorted({*scan.THRESHOLDS, threshold})
    summary = {"scan_version": scan.SCAN_VERSION, "benchmark": benchmark, "corpus": str(corpus),
               "corpus_rows": sum(s.rows for s in shards), "images": len(ids), "threshold": threshold, "k": k,
               "image_only_rate": scan.rates(result, [threshold])[threshold],
               "rates": {str(t): r for t, r in scan.rates(result, sweep).items()},
               "recipe": asdict(embedder.recipe), "eval_source": originals or "hub",
               "eval_ids_sha256": scan.ids_sha256(ids)}  # fmt: skip
    with atomic_path(out / f"{benchmark}.matches.parquet") as tmp:
        datasets.Dataset.from_list(rows).to_parquet(str(tmp))
    with atomic_path(out / f"{benchmark}.summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
    return summary
