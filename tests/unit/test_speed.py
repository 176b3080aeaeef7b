"""`lmms-contam bench-scan` at a small size: every figure measured, with its baseline and ratio."""

from __future__ import annotations

import numpy as np
import pytest

from lmms_contam.corpus import int8
from lmms_contam.corpus.scan import CASTS, QUANTIZATION, READS
from lmms_contam.lab.speed import (
    SCALES,
    ClipLike,
    GrowthPoint,
    _timed_rounds,
    brute_force_float64,
    check_scan,
    compared,
    eval_vectors,
    evict,
    exponents,
    growth_table,
    io_figures,
    scan_figures,
    write_shards,
)


def test_sides_take_turns_in_alternating_order_after_an_untimed_warmup():
    calls = []
    seconds = _timed_rounds(lambda run: calls.append(("a", run)), lambda run: calls.append(("b", run)), repeats=3)
    warmup = [("a", 3), ("b", 3)]  # untimed, in an output folder of its own
    assert calls == [*warmup, ("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]
    assert [len(s) for s in seconds] == [3, 3]


def test_a_figure_is_its_median_round():
    # Rounds' ratios (baseline / ours seconds) are 2, 1 and 0.5: the middle round is the figure.
    figure = compared("x", np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 2.0]), 10, "items/s", 0.9)
    assert (figure.ours, figure.baseline, figure.ratio) == (5.0, 5.0, 1.0)
    assert figure.rounds == (2.0, 1.0, 0.5)
    assert figure.meets_target


def test_clip_like_vectors_share_a_direction_cluster_and_hold_near_copies_around_the_threshold(tmp_path):
    model, rng = ClipLike(), np.random.default_rng(0)
    rows = model.rows(rng, 2000, 256)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1, atol=1e-5)
    cosines = rows[:1000] @ rows[1000:].T
    # Unrelated pairs sit near `shared`, pairs of one cluster near `shared + cluster` (the noise is nearly
    # orthogonal in 256 dimensions): a mixture whose low mode is the shared mean.
    assert abs(np.median(cosines) - model.shared) < 0.05
    assert abs(np.quantile(cosines, 0.9999) - (model.shared + model.cluster)) < 0.1
    queries = eval_vectors("clip-like", 200, 256)
    copies = model.near_copies(queries, rng)
    assert len(copies) == round(model.planted * 200) * model.copies
    made = np.sum(copies * np.repeat(queries[: len(copies) // model.copies], model.copies, axis=0), axis=1)
    assert (made >= model.threshold - model.band - 1e-5).all() and (made <= model.threshold + model.band + 1e-5).all()
    listed = write_shards(tmp_path, 3000, 256, 3, seed=1, dtype="float32", vectors="clip-like", queries=queries)
    corpus = np.concatenate([np.load(path) for _, path, _ in listed])
    best = (queries[:10] @ corpus.T).max(axis=1)  # the planted eval vectors find their near-copies
    assert (best > model.threshold - model.band - 1e-3).all()


def test_the_scan_check_equals_float64_brute_force_and_catches_a_wrong_answer(tmp_path):
    queries = eval_vectors("clip-like", 40, 64)
    listed = write_shards(tmp_path, 2000, 64, 2, seed=3, dtype="float32", vectors="clip-like", queries=queries)
    shards = [np.load(path) for _, path, _ in listed]
    truth = brute_force_float64(queries, shards, 5)
    everything = np.concatenate(shards).astype(np.float64)
    direct = np.sort(queries.astype(np.float64) @ everything.T, axis=1)[:, ::-1][:, :5]
    np.testing.assert_allclose(truth.sims, direct, atol=1e-6)
    check = check_scan(queries, listed, shards, 5, "float32")
    assert check.exact and "0 id(s) missed" in check.detail
    assert {READS, CASTS, "float32 products", "screening"} <= set(check.profile.seconds)
    assert any("where the time goes" in line for line in check.lines())
    assert check.recompute_seconds is None  # nothing is recomputed in the float32 scan
    if int8.available():  # the int8 scan counts the entries its bound could not decide
        check = check_scan(queries, listed, shards, 5, "int8")
        assert check.exact and 0 < check.profile.recomputed < len(queries) * len(np.concatenate(shards))
        assert set(check.profile.seconds) == {
            READS,
            QUANTIZATION,
            "integer products",
            "screening and exact recomputation",
        }
        assert f"{check.profile.recomputed:>10,}" in check.lines()[-3]
        assert 0 < check.recompute_seconds < sum(check.profile.seconds.values())
        assert "recomputing them, estimated" in check.lines()[-2]


def test_growth_exponents_read_the_slope_of_time_on_size():
    points = [GrowthPoint("corpus", s, 10, 100 * s, 0.5 * s, 50.0) for s in SCALES]
    points += [GrowthPoint("eval", s, 10 * s, 100, 0.5 * s**2, 50.0 * s) for s in SCALES]
    slopes = exponents(points)
    assert slopes["corpus"] == pytest.approx(1.0) and slopes["eval"] == pytest.approx(2.0)
    assert "corpus e = 1.00 (linear, within 10% of 1), eval e = 2.00 (SUPER-LINEAR)" in growth_table(points)
    sublinear = points[:3] + [GrowthPoint("eval", s, 10 * s, 100, 0.5 * s**0.5, 50.0) for s in SCALES]
    assert "eval e = 0.50 (sub-linear)" in growth_table(sublinear)


def test_evicted_pages_are_read_again_and_the_files_are_unchanged(tmp_path):
    path = tmp_path / "shard.npy"
    np.save(path, np.arange(1000, dtype=np.float32))
    evict([path])
    assert np.load(path)[-1] == 999


def test_an_accelerator_scan_is_timed_against_its_own_products_and_cold_against_warm(tmp_path):
    # The --scan-device path, run here with float16 on the CPU (no accelerator on these machines): the same
    # figures an accelerator gets, its scan exact and broken down by phase, faiss still the CPU baseline.
    queries = eval_vectors("clip-like", 30, 32)
    listed = write_shards(tmp_path / "corpus", 3000, 32, 2, seed=5, vectors="clip-like", queries=queries)
    figures, seconds, check = scan_figures(queries, listed, 5, tmp_path / "work", "cpu", ("float16",))
    assert [figure.name for figure in figures] == [
        "float16 scan vs matrix products alone",
        "float16 scan vs faiss IndexFlatIP",
    ]
    assert all(len(figure.rounds) == 5 and figure.ours > 0 for figure in figures) and seconds > 0
    assert check.exact and set(check.profile.seconds) == {READS, CASTS, "float16 products and exact re-check"}
    cold, rate = io_figures(queries, listed, 5, "float16", tmp_path / "io", repeats=1, device="cpu")
    assert cold.name.startswith("cold scan") and cold.ours > 0 and rate.ours > 0
