"""The closest corpus matches of a scanned benchmark, eval image beside corpus image, for the report page.

Eval images come from the eval set the scan recorded (its loader, folder or dataset); a corpus image
is shown when the corpus metadata names a local file (as `embed-corpus` writes for image folders).
Public dumps carry only urls: those rows show caption and url. Whatever cannot be shown is said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lmms_contam.corpus.embed import decode
from lmms_contam.corpus.eval_sources import from_spec
from lmms_contam.corpus.shards import lookup, open_corpus
from lmms_contam.imaging import evidence_uri
from lmms_contam.report.benchmark_rates import BenchmarkRates

MAX_SHOWN = 12


@dataclass(frozen=True)
class MatchPair:
    eval_id: str
    similarity: float
    matches_above: int
    caption: str
    url: str
    corpus_source: str
    eval_image: str | None  # data: URI
    corpus_image: str | None


def _eval_images(summary: dict, ids: set[str]) -> tuple[dict, str]:
    if "eval" not in summary:
        return {}, "eval images unavailable: the scan summary does not say how to open its eval set"
    try:
        return {i: evidence_uri(image) for i, image in from_spec(summary["eval"]).images_of(ids).items()}, ""
    except Exception as exc:  # offline hub, moved folder, ...: the page says why and shows the rest
        return {}, f"eval images unavailable: {str(exc).splitlines()[0]}"


def _corpus_rows(summary: dict, best_ids: list[int]) -> tuple[list[dict], str]:
    try:
        shards, _ = open_corpus(summary["corpus"])
        return lookup(shards, np.array(best_ids), ("caption", "url", "source")), ""
    except (OSError, ValueError) as exc:
        return [{"caption": "", "url": "", "source": ""} for _ in best_ids], f"corpus metadata unavailable: {exc}"


def _corpus_image(source: str) -> str | None:
    path = Path(source) if source else None
    if path is None or not path.is_file():
        return None
    try:
        return evidence_uri(decode(path.read_bytes(), source))
    except ValueError:
        return None


def top_matches(rates: BenchmarkRates, n: int = MAX_SHOWN) -> tuple[list[MatchPair], list[str]]:
    """The `n` eval images with the highest best match above the threshold, and notes on what is missing."""
    summary_path = Path(rates.source)
    summary = json.loads(summary_path.read_text())
    matches = pd.read_parquet(summary_path.with_name(f"{rates.benchmark}.matches.parquet"))
    shown = matches[matches["max_similarity"] > rates.threshold].nlargest(n, "max_similarity")
    if shown.empty:
        return [], []
    ids = [str(i) for i in shown["original_id"]]
    eval_images, eval_note = _eval_images(summary, set(ids))
    corpus, corpus_note = _corpus_rows(summary, [int(row[0]) for row in shown["top_ids"]])
    pairs = [
        MatchPair(
            eval_id=eval_id,
            similarity=float(similarity),
            matches_above=int(above),
            caption=meta["caption"],
            url=meta["url"],
            corpus_source=meta["source"],
            eval_image=eval_images.get(eval_id),
            corpus_image=_corpus_image(meta["source"]),
        )
        for eval_id, similarity, above, meta in zip(
            ids, shown["max_similarity"], shown["matches_above_threshold"], corpus, strict=True
        )
    ]
    return pairs, [note for note in (eval_note, corpus_note) if note]
