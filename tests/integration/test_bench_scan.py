"""lmms-contam bench-scan end to end, every figure beside its baseline."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lmms_contam.corpus.int8 import available


def test_bench_reports_every_figure_against_its_baseline(tmp_path):
    command = [sys.executable, "-m", "lmms_contam.cli", "bench-scan", "--eval", "200", "--corpus", "20000",
               "--dim", "128", "--images", "8", "--json", str(tmp_path / "bench.json")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = {f["name"].split(" (")[0]: f for f in json.loads((tmp_path / "bench.json").read_text())["figures"]}
    scans = [f"{precision} scan vs {baseline}" for precision in ["float32", *(["int8"] if available() else [])]
             for baseline in ["matrix products alone", "faiss IndexFlatIP"]]  # fmt: skip
    assert set(figures) == {*scans, "embedding pipeline vs forward alone", "embed once + scan vs per-pair recipe",
                            "peak memory, 4x corpus vs 1x"}  # fmt: skip
    for figure in figures.values():
        assert figure["ours"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == pytest.approx(figure["ours"] / figure["baseline"])
        if not figure["name"].startswith(("embed once", "peak memory")):
            assert len(figure["rounds"]) == 5 and figure["ratio"] == pytest.approx(np.median(figure["rounds"]))
        assert figure["name"] in done.stdout
    # Properties that hold at any size: embedding each image once beats embedding every pair, and
    # memory-mapped shards keep the peak flat when the corpus grows.
    assert figures["embed once + scan vs per-pair recipe"]["ratio"] > 10
    assert figures["peak memory, 4x corpus vs 1x"]["ratio"] < 1.3
