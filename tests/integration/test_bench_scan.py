"""lmms-contam bench-scan end to end, every figure beside its baseline."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lmms_contam.corpus.embedder_configs import embedder_config
from lmms_contam.corpus.int8 import available
from lmms_contam.lab.speed import embedding_figures


def test_bench_reports_every_figure_against_its_baseline(tmp_path):
    command = [sys.executable, "-m", "lmms_contam.cli", "bench-scan", "--eval", "200", "--corpus", "20000",
               "--dim", "128", "--images", "8", "--vectors", "clip-like",
               "--json", str(tmp_path / "bench.json")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads((tmp_path / "bench.json").read_text())
    figures = {f["name"].split(" (")[0]: f for f in written["figures"]}
    scans = [f"{precision} scan vs {baseline}" for precision in ["float32", *(["int8"] if available() else [])]
             for baseline in ["matrix products alone", "faiss IndexFlatIP"]]  # fmt: skip
    io = ["cold scan", "read rate of the cold scan vs a plain sequential read"]
    assert set(figures) == {*scans, *io, "embedding pipeline vs forward alone", "embed once + scan vs per-pair recipe",
                            "peak memory, 4x corpus vs 1x"}  # fmt: skip
    for figure in figures.values():
        assert figure["ours"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == pytest.approx(figure["ours"] / figure["baseline"])
        if not figure["name"].startswith(("embed once", "peak memory")):
            rounds = 3 if figure["name"].startswith(("cold", "read rate")) else 5
            assert len(figure["rounds"]) == rounds and figure["ratio"] == pytest.approx(np.median(figure["rounds"]))
        assert figure["name"] in done.stdout
    # Properties that hold at any size: embedding each image once beats embedding every pair, and
    # memory-mapped shards keep the peak flat when the corpus grows.
    assert figures["embed once + scan vs per-pair recipe"]["ratio"] > 10
    assert figures["peak memory, 4x corpus vs 1x"]["ratio"] < 1.3
    # The scan's result equals float64 brute force on clip-like vectors, and its time is broken down by phase.
    assert written["check"]["exact"] and written["settings"]["vectors"] == "clip-like"
    assert "exact against float64 brute force: yes" in done.stdout and "where the time goes" in done.stdout
    assert figures["read rate of the cold scan vs a plain sequential read"]["target"] is None


def test_growth_mode_times_each_size_and_draws_them(tmp_path):
    command = [sys.executable, "-m", "lmms_contam.cli", "bench-scan", "--growth", "--eval", "100", "--corpus", "4000",
               "--dim", "64", "--shards", "2", "--plot", str(tmp_path / "growth.png"), "--json",
               str(tmp_path / "growth.json")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads((tmp_path / "growth.json").read_text())
    sizes = [(p["axis"], p["n_eval"], p["n_corpus"]) for p in written["points"]]
    assert sizes == [("corpus", 100, 4000 * s) for s in (1, 2, 4)] + [("eval", 100 * s, 4000) for s in (1, 2, 4)]
    assert all(p["seconds"] > 0 and p["peak_mib"] > 0 for p in written["points"])
    assert set(written["exponents"]) == {"corpus", "eval"} and "time grows as size^e" in done.stdout
    corpus_peaks = [p["peak_mib"] for p in written["points"] if p["axis"] == "corpus"]
    assert max(corpus_peaks) / min(corpus_peaks) < 1.3  # memory-mapped shards: flat in the corpus size
    assert (tmp_path / "growth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "options, reason",
    [
        (["--plot", "x.png"], "--plot draws the --growth figures: give both"),
        (["--growth", "--scan-device", "cuda"], "--growth measures the CPU scan: leave --scan-device out"),
    ],
)
def test_options_that_do_not_go_together_are_refused(tmp_path, options, reason):
    done = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "bench-scan", *options], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and reason in done.stderr and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("name", ["pixels", "efficientnet-lite0"])  # the listed embedders whose weights are here
def test_the_embedding_figures_time_every_listed_embedder_that_runs_offline(name, tmp_path):
    """Defect 14: `bench-scan --embedder pixels` (an embedder `lmms-contam embedders` lists) ended in a TypeError:
    the baseline stacked torch tensors that only a torch embedder prepares."""
    embedder = embedder_config(name).build("cpu")
    figures = embedding_figures(embedder, n_images=4, n_eval=10, n_corpus=100, scan_seconds=0.01, work=tmp_path)
    assert [f.name.split(" (")[0] for f in figures] == ["embedding pipeline vs forward alone",
                                                         "embed once + scan vs per-pair recipe"]  # fmt: skip
    assert all(f.ours > 0 and f.baseline > 0 for f in figures)
