"""DataComp's .npz features into the layout the scan reads: same vectors, captions, refusals by row."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.datacomp import unit, write_shard

from lmms_contam.corpus.embed import EmbeddingRecipe
from lmms_contam.corpus.scan import scan_shards
from lmms_contam.corpus.shards import lookup, open_corpus

RECIPE = EmbeddingRecipe("open_clip", "ViT-L-14", "openai", "DataComp's 224 px resize", "float16")


def run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "import", "datacomp", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.fixture
def release(tmp_path):
    rng = np.random.default_rng(3)
    folder = tmp_path / "datacomp"
    folder.mkdir()
    shards = [unit(rng.normal(size=(30, 16))), unit(rng.normal(size=(20, 16)))]
    for number, vectors in enumerate(shards):
        write_shard(folder, f"{number:08d}", vectors, [f"caption {number}-{i}" for i in range(len(vectors))])
    (tmp_path / "recipe.json").write_text(json.dumps(asdict(RECIPE)))
    return folder, shards, tmp_path / "recipe.json"


def test_imported_shards_scan_like_the_features(release, tmp_path):
    folder, shards, recipe = release
    done = run(str(folder), "--out", str(tmp_path / "corpus"), "--recipe", str(recipe))
    assert done.returncode == 0, done.stderr
    assert "50 vectors in 2 shard(s)" in done.stdout
    opened, found_recipe = open_corpus(tmp_path / "corpus")
    assert found_recipe == RECIPE and [s.rows for s in opened] == [30, 20]
    query = shards[1][7:8]
    result = scan_shards(query, [(s.name, s.vectors, s.offset) for s in opened], tmp_path / "work", k=1)
    assert result.ids[0, 0] == 37 and result.sims[0, 0] == pytest.approx(1.0, abs=1e-3)
    assert lookup(opened, result.ids)[0] == {"caption": "caption 1-7", "url": "http://x/00000001/7"}
    again = run(str(folder), "--out", str(tmp_path / "corpus"), "--recipe", str(recipe))
    assert "(2 reused)" in again.stdout


def test_a_rerun_converts_again_what_changed_and_equals_a_fresh_import(release, tmp_path):
    """Each input changed in turn: a shard's features, its captions, the source shrinking (its last shard
    goes), the array imported."""
    folder, shards, recipe = release

    def corpus(out):
        opened, _ = open_corpus(out)
        return ([np.load(s.vectors).tolist() for s in opened], [pq.read_table(s.metadata).to_pylist() for s in opened])

    changes = [
        ("features", lambda: write_shard(folder, "00000001", shards[1][::-1].copy(), ["c"] * 20), [], 1),
        ("captions", lambda: write_shard(folder, "00000001", shards[1][::-1].copy(), ["d"] * 20), [], 1),
        ("a shard removed", lambda: [(folder / f"00000001.{s}").unlink() for s in ("npz", "parquet")], [], 1),
        ("the array", lambda: None, ["--key", "b32_img"], 0),
    ]
    assert run(str(folder), "--out", str(tmp_path / "out"), "--recipe", str(recipe)).returncode == 0
    for number, (name, change, extra, reused) in enumerate(changes):
        change()
        rerun = run(str(folder), "--out", str(tmp_path / "out"), "--recipe", str(recipe), *extra)
        assert rerun.returncode == 0 and f"({reused} reused)" in rerun.stdout, (name, rerun.stdout + rerun.stderr)
        fresh = run(str(folder), "--out", str(tmp_path / f"fresh{number}"), "--recipe", str(recipe), *extra)
        assert fresh.returncode == 0, fresh.stderr
        assert corpus(tmp_path / "out") == corpus(tmp_path / f"fresh{number}"), name


def test_bad_features_are_refused_naming_file_and_row(release, tmp_path):
    folder, shards, recipe = release
    broken = shards[1].copy()
    broken[4] *= 3
    write_shard(folder, "00000001", broken, ["c"] * 20)
    done = run(str(folder), "--out", str(tmp_path / "a"), "--recipe", str(recipe))
    assert done.returncode == 2 and "00000001.npz: l14_img row 4 has norm 3.0000" in done.stderr
    assert not (tmp_path / "a" / "img_emb" / "img_emb_1.npy").exists()
    broken[4] = np.nan
    write_shard(folder, "00000001", broken, ["c"] * 20)
    assert "row 4 holds NaN" in run(str(folder), "--out", str(tmp_path / "b"), "--recipe", str(recipe)).stderr
    write_shard(folder, "00000001", shards[1], ["c"] * 20)
    pq.write_table(pa.table({"text": ["c"] * 19}), folder / "00000001.parquet")
    assert "19 rows for 20 vectors" in run(str(folder), "--out", str(tmp_path / "c"), "--recipe", str(recipe)).stderr
    missing = run(str(folder), "--out", str(tmp_path / "d"), "--recipe", str(recipe), "--key", "h14_img")
    assert missing.returncode == 2 and "no array 'h14_img' (arrays: l14_img, b32_img)" in missing.stderr
