"""A scan's output files written in the scan's own format, with matched captions a scripted judge reads."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pandas as pd

from helpers.fixtures import real_photos
from lmms_contam.corpus.scan import SCAN_VERSION, ids_sha256

# (question stem, options, answer letter, captions above the threshold, what the scripted judge says)
ITEMS = [
    ("What animal is in the image?", ["cat", "dog", "horse", "cow"], "B",
     ["a brown dog running on the beach", "beach at sunset"], "answerable"),
    ("What colour is the car?", ["red", "blue", "green", "white"], "A", ["vintage car parked outside"],
     "not answerable"),
    ("Which street sign is shown?", ["Straße", "Allee", "Platz", "Weg"], "A",
     ["Ein Hund läuft über die STRASSE", "x" * 5000], "answerable"),
    ("How many people are there?", ["one", "two", "three", "four"], "C", ["three friends hiking"], "garbage"),
    ("Is it day or night?", ["day", "night", "dusk", "dawn"], "B", ["a city skyline"], "garbage-then-valid"),
    ("What fruit is this?", ["apple", "pear", "plum", "fig"], "D", [""], None),  # matched, caption empty
    ("What is on the table?", ["a cup", "a book", "a lamp", "a pen"], "B", [], None),  # no match above
]  # fmt: skip


def write_scan(folder: Path) -> tuple[Path, Path]:
    """A local MMStar copy (the lmms-eval layout) and a scan of it with the captions above."""
    photos = real_photos()
    rows, matches = [], []
    for index, (stem, options, answer, captions, _) in enumerate(ITEMS):
        listed = ", ".join(f"{letter}: {text}" for letter, text in zip("ABCD", options, strict=True))
        rows.append({"index": index, "question": f"{stem}\nOptions: {listed}", "answer": answer,
                     "category": "coarse perception", "l2_category": "image scene and topic",
                     "image": {"bytes": photos[index]}})  # fmt: skip
        similar = [0.97 - 0.01 * i for i in range(len(captions))]
        padded = (captions + ["a stranger's photo", "another stranger", "a third stranger"])[:3]
        matches.append({"original_id": str(index), "max_similarity": (similar or [0.4])[0],
                        "matches_above_threshold": len(captions), "top_ids": [10 * index + i for i in range(3)],
                        "top_similarities": (similar + [0.41, 0.40, 0.39])[:3], "top_captions": padded,
                        "top_urls": ["u"] * 3})  # fmt: skip
    originals = folder / "mmstar.parquet"
    datasets.Dataset.from_list(rows).cast_column("image", datasets.Image()).to_parquet(str(originals))
    scans = folder / "scans"
    scans.mkdir()
    pd.DataFrame(matches).to_parquet(scans / "mmstar.matches.parquet")
    summary = {"scan_version": SCAN_VERSION, "benchmark": "mmstar", "threshold": 0.9, "k": 3, "images": len(ITEMS),
               "image_only_rate": 6 / 7, "recipe": {"family": "test"}, "eval_source": str(originals),
               "eval_ids_sha256": ids_sha256([str(i) for i in range(len(ITEMS))])}  # fmt: skip
    (scans / "mmstar.summary.json").write_text(json.dumps(summary))
    return originals, scans
