"""`lmms-contam scan` end to end with the offline embedder: planted copies found, strangers not."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import asdict

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from helpers.benchmark_copies import write_corpus_folder
from helpers.fixtures import real_photos, write_mmstar_originals
from PIL import Image, ImageOps

from lmms_contam.corpus.embed import EfficientNetLite0Embedder
from lmms_contam.corpus.ingest import embed_corpus
from lmms_contam.corpus.int8 import available


def jpeg(image: Image.Image) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=60)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def test_scan_finds_planted_copies_with_their_captions(tmp_path):
    from sklearn.datasets import load_sample_images

    photos = [Image.open(io.BytesIO(p)).convert("RGB") for p in real_photos(size=224)]
    originals = write_mmstar_originals(tmp_path / "mmstar.parquet")

    planted = [ImageOps.mirror(photos[0]), jpeg(photos[1]), photos[2].crop((10, 10, 200, 200)), jpeg(photos[3])]
    strangers = photos[12:16] + [Image.fromarray(a) for a in load_sample_images().images]
    corpus_images = strangers[:3] + planted + strangers[3:]
    captions = [f"stranger {i}" for i in range(3)] + [f"copy of item {i}" for i in range(4)] + ["stranger 3",
                "stranger 4", "stranger 5"]  # fmt: skip
    embedder = EfficientNetLite0Embedder()
    vectors = embedder.embed(corpus_images)
    corpus = tmp_path / "corpus"
    (corpus / "img_emb").mkdir(parents=True)
    (corpus / "metadata").mkdir()
    for shard, (start, stop) in enumerate(((0, 5), (5, 10))):
        np.save(corpus / "img_emb" / f"img_emb_{shard}.npy", vectors[start:stop])
        pq.write_table(pa.table({"caption": captions[start:stop], "url": [f"u{i}" for i in range(start, stop)]}),
                       corpus / "metadata" / f"metadata_{shard}.parquet")  # fmt: skip
    (corpus / "recipe.json").write_text(json.dumps(asdict(embedder.recipe)))

    out = tmp_path / "scans"
    command = [sys.executable, "-m", "lmms_contam.cli", "scan", "--eval", "mmstar", "--corpus", str(corpus),
               "--out", str(out), "--embedder", "efficientnet-lite0", "--threshold", "0.5", "--k", "3",
               "--originals", str(originals)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "mmstar: image-only contamination rate 0.333" in done.stdout
    summary = json.loads((out / "mmstar.summary.json").read_text())
    assert (summary["images"], summary["corpus_rows"]) == (12, 10)
    assert summary["recipe"]["family"] == "efficientnet_lite0"
    found = datasets.load_dataset("parquet", data_files=str(out / "mmstar.matches.parquet"), split="train")
    matches = {r["original_id"]: r for r in found}
    for i in range(4):
        assert matches[str(i)]["top_captions"][0] == f"copy of item {i}"
        assert matches[str(i)]["matches_above_threshold"] == 1
    assert all(matches[str(i)]["max_similarity"] < 0.5 for i in range(4, 12))
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.stdout == done.stdout
    assert summary["mode"]["precision"] == ("int8" if available() else "float32")  # auto, on a CPU
    for precision in ["float32", "bfloat16"]:  # every precision gives the same result
        other_out = tmp_path / f"scans-{precision}"
        other = [*command[: command.index("--out") + 1], str(other_out), *command[command.index("--out") + 2 :],
                 "--precision", precision]  # fmt: skip
        assert subprocess.run(other, capture_output=True, text=True, timeout=600).returncode == 0
        again = datasets.load_dataset("parquet", data_files=str(other_out / "mmstar.matches.parquet"), split="train")
        assert again["top_ids"] == found["top_ids"]
        assert again["matches_above_threshold"] == found["matches_above_threshold"]
        np.testing.assert_allclose(again["top_similarities"], found["top_similarities"], atol=1e-5)
        assert json.loads((other_out / "mmstar.summary.json").read_text())["mode"]["precision"] == precision

    other = json.loads((corpus / "recipe.json").read_text())
    (corpus / "recipe.json").write_text(json.dumps({**other, "dtype": "float16"}))
    refused = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "different recipes" in refused.stderr


def test_an_image_folder_and_a_dataset_column_are_eval_sets_too(tmp_path):
    embed_corpus(write_corpus_folder(tmp_path / "corpus_images"), tmp_path / "corpus", EfficientNetLite0Embedder())
    photos = real_photos(size=128)  # the corpus holds copies of photos 0-7
    for i, data in enumerate(photos):
        folder = tmp_path / "eval" / ("people" if i % 2 else "things")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:02d}.png").write_bytes(data)
    rows = [{"name": f"photo-{i}", "picture": {"bytes": data}} for i, data in enumerate(photos)]
    table = datasets.Dataset.from_list(rows).cast_column("picture", datasets.Image())
    table.to_parquet(str(tmp_path / "eval_set.parquet"))
    command = [sys.executable, "-m", "lmms_contam.cli", "scan", "--corpus", str(tmp_path / "corpus"), "--out",
               str(tmp_path / "scans"), "--embedder", "efficientnet-lite0", "--eval-folder", str(tmp_path / "eval"),
               "--eval-dataset", str(tmp_path / "eval_set.parquet"), "--image-column", "picture",
               "--id-column", "name"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    folder = pd.read_parquet(tmp_path / "scans" / "eval.matches.parquet").set_index("original_id")
    assert folder.loc["things/00.png", "matches_above_threshold"] == 1
    assert folder.loc["people/09.png", "matches_above_threshold"] == 0
    dataset = pd.read_parquet(tmp_path / "scans" / "eval_set.matches.parquet").set_index("original_id")
    flagged = {i for i in range(16) if dataset.loc[f"photo-{i}", "matches_above_threshold"] > 0}
    assert flagged == set(range(8))
    summary = json.loads((tmp_path / "scans" / "eval.summary.json").read_text())
    assert summary["image_only_rate"] == 0.5 and summary["eval_source"].startswith("folder ")
    dataset_only = str(tmp_path / "eval_set.parquet")
    without_columns = [*command[: command.index("--eval-dataset")], "--eval-dataset", dataset_only]
    bad = subprocess.run(without_columns, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "no column 'image'" in bad.stderr
