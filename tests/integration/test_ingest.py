"""`lmms-contam embed-corpus`: image folders, webdataset tars and parquet into the layout `scan` reads."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.corpora import corpus_files, write_folder
from helpers.fixtures import real_photos, write_mmstar_originals
from PIL import Image

from lmms_contam.corpus.embed import EfficientNetLite0Embedder, to_rgb
from lmms_contam.corpus.shards import lookup, open_corpus


def write_tar(path: Path, files) -> Path:
    with tarfile.open(path, "w") as archive:
        for name, data, caption, url in files:
            stem, suffix = name.split(".")
            for member, payload in (
                (name, data),
                (f"{stem}.json", json.dumps({"caption": caption, "url": url}).encode()),
            ):
                info = tarfile.TarInfo(member)
                info.size = len(payload)
                archive.addfile(info, io.BytesIO(payload))
    return path


def write_parquet(path: Path, files) -> Path:
    pq.write_table(pa.table({"image": [d for _, d, _, _ in files], "caption": [c for _, _, c, _ in files],
                             "url": [u for _, _, _, u in files]}), path)  # fmt: skip
    return path


def embed(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "embed-corpus", str(source), "--out", str(out),
               "--embedder", "efficientnet-lite0", "--shard-size", "5", *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def folder_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("ingest")
    files = corpus_files()
    source = write_folder(root / "images", files)
    done = embed(source, root / "corpus")
    assert done.returncode == 0, done.stderr
    return root, files, done


def test_folder_corpus_is_embedded_with_captions_and_counted_skips(folder_corpus):
    root, files, done = folder_corpus
    assert "12 images embedded into 3 shard(s)" in done.stdout and "2 skipped" in done.stdout
    shards, recipe = open_corpus(root / "corpus")
    assert recipe.family == "efficientnet_lite0" and [s.rows for s in shards] == [5, 5, 2]
    skipped = [json.loads(line) for p in sorted((root / "corpus" / "skipped").glob("*.jsonl"))
               for line in p.read_text().splitlines()]  # fmt: skip
    assert [Path(s["source"]).name for s in skipped] == ["0104.jpg", "0105.jpg"]
    assert "unreadable image" in skipped[0]["reason"] and "empty file" in skipped[1]["reason"]
    kept = [f for f in files if f[0] not in ("0104.jpg", "0105.jpg")]
    assert [m["caption"] for m in lookup(shards, np.arange(12))] == [c for _, _, c, _ in kept]
    assert lookup(shards, np.array([0]))[0]["url"] == "https://example.org/0.jpg"
    vectors = np.concatenate([np.load(s.vectors) for s in shards])
    direct = EfficientNetLite0Embedder().embed([to_rgb(Image.open(io.BytesIO(d))) for _, d, _, _ in kept])
    assert np.allclose(vectors, direct, atol=1e-5)


@pytest.mark.parametrize("kind", ["tar", "parquet"])
def test_tar_and_parquet_sources_give_the_folders_vectors(folder_corpus, tmp_path, kind):
    root, files, _ = folder_corpus
    source = write_tar(tmp_path / "shard.tar", files) if kind == "tar" else write_parquet(tmp_path / "c.parquet", files)
    done = embed(source, tmp_path / "corpus")
    assert done.returncode == 0, done.stderr
    theirs, _ = open_corpus(tmp_path / "corpus")
    ours, _ = open_corpus(root / "corpus")
    assert np.allclose(np.concatenate([np.load(s.vectors) for s in theirs]),
                       np.concatenate([np.load(s.vectors) for s in ours]), atol=1e-6)  # fmt: skip
    # The folder gives odd items a .txt sidecar (caption only); the tar and parquet carry every url.
    assert [m["caption"] for m in lookup(theirs, np.arange(12))] == [m["caption"] for m in lookup(ours, np.arange(12))]
    assert lookup(theirs, np.array([1]))[0]["url"] == "https://example.org/1.jpg"


def test_rerun_reuses_finished_shards_and_refuses_another_recipe(folder_corpus, tmp_path):
    root, _, _ = folder_corpus
    corpus = tmp_path / "corpus"
    import shutil

    shutil.copytree(root / "corpus", corpus)
    stamps = {p.name: p.stat().st_mtime_ns for p in (corpus / "img_emb").glob("*.npy")}
    (corpus / "img_emb" / "img_emb_1.npy").unlink()
    done = embed(root / "images", corpus)
    assert done.returncode == 0 and "(2 reused)" in done.stdout, done.stdout + done.stderr
    after = {p.name: p.stat().st_mtime_ns for p in (corpus / "img_emb").glob("*.npy")}
    assert after["img_emb_0.npy"] == stamps["img_emb_0.npy"] and after["img_emb_2.npy"] == stamps["img_emb_2.npy"]
    recipe = json.loads((corpus / "recipe.json").read_text())
    (corpus / "recipe.json").write_text(json.dumps({**recipe, "dtype": "float16"}))
    refused = embed(root / "images", corpus)
    assert refused.returncode == 2 and "different recipes" in refused.stderr


def test_scan_finds_the_eval_images_in_an_embedded_folder(folder_corpus, tmp_path):
    root, _, _ = folder_corpus
    originals = write_mmstar_originals(tmp_path / "mmstar.parquet")
    command = [sys.executable, "-m", "lmms_contam.cli", "scan", "--eval", "mmstar", "--corpus", str(root / "corpus"),
               "--out", str(tmp_path / "scans"), "--embedder", "efficientnet-lite0", "--threshold", "0.5",
               "--originals", str(originals)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    found = datasets.load_dataset("parquet", data_files=str(tmp_path / "scans" / "mmstar.matches.parquet"),
                                  split="train")  # fmt: skip
    matches = {r["original_id"]: r for r in found}
    for i in range(4):
        assert matches[str(i)]["top_captions"][0] == f"a copy of eval item {i}"


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_local_embedding_holds_a_bounded_number_of_images_ahead_of_the_model(device):
    """For a model on an accelerator, decoding threads run ahead of it by at most `ahead` images (a
    shard of 100,000 decoded images would not fit in memory); beside a model on the CPU, images are
    prepared on its own thread as each batch fills. Either way in order, unreadable images skipped
    where they stand."""
    import threading
    import time

    from lmms_contam.corpus.embed import PixelEmbedder
    from lmms_contam.corpus.ingest import CorpusRecord, LocalEmbedding

    class Watched(PixelEmbedder):
        batch_size = 4

        def __init__(self):
            super().__init__()
            self.device = device  # decides the default decoding; pixels are computed on the CPU anyway
            self.prepared, self.most_ahead, self.lock = 0, 0, threading.Lock()
            self.threads = set()

        def prepare(self, image):
            with self.lock:
                self.prepared += 1
                self.threads.add(threading.get_ident())
            return super().prepare(image)

        def embed_prepared(self, prepared):
            rows = []
            for row in prepared:
                rows.append(row)
                time.sleep(0.005)  # a slow model: decoding would run far ahead if nothing held it back
                self.most_ahead = max(self.most_ahead, self.prepared - len(rows))
            return super().embed_prepared(rows)

    photos = real_photos(size=48) * 4
    records = [CorpusRecord(f"{i}.png", data, "", "") for i, data in enumerate(photos)]
    records.insert(7, CorpusRecord("broken.jpg", b"not an image", "", ""))
    embedder = Watched()
    shard = LocalEmbedding(embedder).embed_shard(records)
    if device == "cpu":
        assert embedder.most_ahead == 0 and embedder.threads == {threading.get_ident()}
    else:
        assert 0 < embedder.most_ahead <= 2 * embedder.batch_size + 1
        assert threading.get_ident() not in embedder.threads
    assert [r.key for r in shard.kept] == [f"{i}.png" for i in range(len(photos))]
    assert [s["source"] for s in shard.skipped] == ["broken.jpg"]
    expected = PixelEmbedder().embed([Image.open(io.BytesIO(data)) for data in photos])
    np.testing.assert_array_equal(shard.vectors, expected)
