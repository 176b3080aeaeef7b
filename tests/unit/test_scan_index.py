"""Index mode: a faiss index proposes candidates, the stored vectors give their exact cosines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest

from lmms_contam.corpus.embed import EmbeddingRecipe
from lmms_contam.corpus.index import IndexSettings, build_index, search_index
from lmms_contam.corpus.scan import scan_shards
from lmms_contam.corpus.shards import open_corpus

PLANTED = [17, 2_500, 5_999, 11_111]


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """12,000 float16 vectors in 3 shards (clip-retrieval layout), queries with 4 planted near-copies."""
    folder = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(7)
    vectors = unit(rng.normal(size=(12_000, 64)))
    (folder / "img_emb").mkdir()
    for number, rows in enumerate(np.array_split(vectors, 3)):
        np.save(folder / "img_emb" / f"img_emb_{number}.npy", rows.astype(np.float16))
    recipe = EmbeddingRecipe("test", "random", "none", "none", "float16")
    (folder / "recipe.json").write_text(json.dumps(asdict(recipe)))
    queries = unit(rng.normal(size=(50, 64)))
    queries[: len(PLANTED)] = unit(vectors[PLANTED] + rng.normal(scale=0.04, size=(len(PLANTED), 64)))
    return folder, queries


def exact(folder, queries, tmp_path, k=10):
    shards, _ = open_corpus(folder)
    return scan_shards(queries, [(s.name, s.vectors, s.offset) for s in shards], tmp_path / "exact", k=k)


def test_a_flat_index_gives_the_exact_scan(corpus, tmp_path):
    folder, queries = corpus
    build_index(folder, "Flat", tmp_path / "flat")
    found, mode = search_index(queries, folder, 10, 0.9, IndexSettings(str(tmp_path / "flat"), candidates=10))
    truth = exact(folder, queries, tmp_path)
    assert (found.ids == truth.ids).all()
    np.testing.assert_allclose(found.sims, truth.sims, atol=1e-5)
    assert mode["factory"] == "Flat" and "lower bound" in mode["matches_above_threshold"]


def test_approximate_index_candidates_are_rescored_exactly(corpus, tmp_path):
    folder, queries = corpus
    build_index(folder, "IVF16,PQ8", tmp_path / "pq")  # PQ distances are approximate
    found, _ = search_index(queries, folder, 5, 0.9, IndexSettings(str(tmp_path / "pq"), candidates=200, nprobe=4))
    truth = exact(folder, queries, tmp_path, k=5)
    assert list(found.ids[: len(PLANTED), 0]) == PLANTED
    np.testing.assert_allclose(found.sims[: len(PLANTED), 0], truth.sims[: len(PLANTED), 0], atol=1e-5)
    # Every reported similarity is the exact cosine of the reported row, whatever PQ estimated.
    stored = np.concatenate([np.load(folder / "img_emb" / f"img_emb_{n}.npy") for n in range(3)]).astype(np.float32)
    recomputed = np.einsum("ij,ikj->ik", queries, stored[found.ids])
    np.testing.assert_allclose(found.sims, recomputed, atol=1e-5)
    assert (found.above[: len(PLANTED)] == 1).all() and (found.above[len(PLANTED) :] == 0).all()


def test_an_index_of_another_corpus_state_is_refused(corpus, tmp_path):
    folder, queries = corpus
    build_index(folder, "Flat", tmp_path / "old")
    manifest = json.loads((tmp_path / "old" / "index.json").read_text())
    manifest["shards"][1][1] += 1  # as if shard 1 had grown since
    (tmp_path / "old" / "index.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="built from another state"):
        search_index(queries, folder, 10, 0.9, IndexSettings(str(tmp_path / "old")))
    # Another corpus under the same shard names and shapes: one shard's vectors replaced.
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    build_index(copy, "Flat", tmp_path / "fresh")
    shard = copy / "img_emb" / "img_emb_1.npy"
    np.save(shard, np.load(shard)[::-1])
    with pytest.raises(ValueError, match="built from another state"):
        search_index(queries, copy, 10, 0.9, IndexSettings(str(tmp_path / "fresh")))


def test_index_corpus_command_and_a_bad_factory(corpus, tmp_path):
    folder, _ = corpus
    command = [sys.executable, "-m", "lmms_contam.cli", "index-corpus", str(folder), "--out", str(tmp_path / "i")]
    done = subprocess.run([*command, "--factory", "IVF8,Flat"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "i" / "index.json").read_text())
    assert [shard[:2] for shard in manifest["shards"]] == [
        ["img_emb_0", 4000],
        ["img_emb_1", 4000],
        ["img_emb_2", 4000],
    ]
    assert manifest["trained_on"] == 12_000
    bad = subprocess.run([*command, "--factory", "NoSuchIndex"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "lmms-contam index-corpus:" in bad.stderr
