"""`lmms-contam bench-scan` at a small size: every figure measured, with its baseline and ratio."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lmms_contam.corpus.int8 import available
from lmms_contam.corpus.speed import _timed_rounds, compared


def test_sides_take_turns_in_alternating_order():
    calls = []
    seconds = _timed_rounds(lambda run: calls.append(("a", run)), lambda run: calls.append(("b", run)), repeats=3)
    assert calls == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]
    assert [len(s) for s in seconds] == [3, 3]


def test_a_figure_is_its_median_round():
    # Rounds' ratios (baseline / ours seconds) are 2, 1 and 0.5: the middle round is the figure.
    figure = compared("x", np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 2.0]), 10, "items/s", 0.9)
    assert (figure.ours, figure.baseline, figure.ratio) == (5.0, 5.0, 1.0)
    assert figure.rounds == (2.0, 1.0, 0.5)
    assert figure.meets_target


@pytest.mark.slow
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
