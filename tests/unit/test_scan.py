"""The exact streaming scan against brute force, across shard splits and reruns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmms_contam.corpus import int8, scan
from lmms_contam.corpus.runners import LocalRunner
from lmms_contam.corpus.scan import TopK, merge, rates, scan_matrix, scan_shards


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def vectors():
    rng = np.random.default_rng(0)
    corpus = unit(rng.normal(size=(5000, 64)))
    queries = unit(rng.normal(size=(40, 64)))
    queries[:5] = unit(corpus[[10, 999, 2500, 4000, 4999]] + rng.normal(scale=0.05, size=(5, 64)))  # near-copies
    return queries, corpus


def brute(queries, corpus, k):
    # float64, then float32: duplicate corpus rows get exactly equal values (a float32 BLAS may differ in the
    # last bit between columns), so a stable sort breaks their ties by the smaller id
    sims = (queries.astype(np.float64) @ corpus.T.astype(np.float64)).astype(np.float32)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1), order


@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_scan_equals_brute_force_and_finds_planted_copies(vectors, precision):
    queries, corpus = vectors
    result = scan_matrix(queries, corpus, offset=0, k=10, chunk=777, precision=precision)
    sims, ids = brute(queries, corpus, 10)
    np.testing.assert_allclose(result.sims, sims, atol=1e-5)
    assert (result.ids == ids).all()
    assert list(result.ids[:5, 0]) == [10, 999, 2500, 4000, 4999]
    assert rates(result)[0.9] == pytest.approx(5 / 40)
    assert (result.above == ((queries @ corpus.T) > 0.9).sum(axis=1)).all()
    assert result.above[:5].tolist() == [1] * 5


@pytest.mark.parametrize("precision", ["float32", "int8"])
@pytest.mark.parametrize(
    "row_block, tile_bytes, chunk", [(7, 64 * 4 * 13, 333), (scan.ROW_BLOCK, scan.tile_bytes(), scan.DEFAULT_CHUNK)]
)
def test_tiles_row_blocks_and_exact_duplicates_keep_the_brute_force_result(vectors, monkeypatch, row_block,
                                                                           tile_bytes, chunk, precision):  # fmt: skip
    """Exact duplicate corpus rows tie at every rank: the smaller id must win, however the work is cut."""
    queries, corpus = vectors
    copies = np.concatenate([corpus, corpus[:100], corpus[:50], corpus[:100]])  # row i also at 5000+i, 5100+i, ...
    queries = np.concatenate([queries, corpus[[3, 70, 4999]]])  # exact copies: ties at 1.0
    monkeypatch.setattr(scan, "ROW_BLOCK", row_block)
    monkeypatch.setattr(scan, "tile_bytes", lambda: tile_bytes)
    result = scan_matrix(queries, copies, offset=0, k=10, chunk=chunk, count_above=0.2, precision=precision)
    sims, ids = brute(queries, copies, 10)
    np.testing.assert_allclose(result.sims, sims, atol=1e-5)
    assert (result.ids == ids).all()
    assert result.ids[-3].tolist()[:4] == [3, 5003, 5100 + 3, 5150 + 3]
    assert (result.above == ((queries @ copies.T) > 0.2).sum(axis=1)).all()
    assert (result.sims[:, -1] > 0.2).any()  # rows whose k-th best is above the threshold are counted in full

    def shard(rows, offset):
        return scan_matrix(queries, rows, offset=offset, k=10, chunk=chunk, count_above=0.2, precision=precision)

    split = merge(shard(copies[:5120], 0), shard(copies[5120:], 5120))
    assert (split.ids == result.ids).all() and (split.above == result.above).all()  # two shards, ties split


class CountingRunner(LocalRunner):
    """The in-process runner, recording which shard files it was asked to scan."""

    def __init__(self) -> None:
        self.scanned: list[str] = []

    def imap(self, function, shared, jobs, labels=None):
        self.scanned += [Path(job[0]).name for job in jobs]
        return super().imap(function, shared, jobs, labels)


def test_one_shard_equals_ten_and_a_rerun_reads_saved_results(vectors, tmp_path):
    queries, corpus = vectors
    paths = []
    for i, rows in enumerate(np.array_split(corpus, 10)):
        path = tmp_path / f"img_emb_{i}.npy"
        np.save(path, rows.astype(np.float16))
        paths.append((f"shard{i}", path, sum(len(r) for r in np.array_split(corpus, 10)[:i])))
    np.save(tmp_path / "all.npy", corpus.astype(np.float16))
    ten = scan_shards(queries, paths, tmp_path / "work10", k=10)
    one = scan_shards(queries, [("all", tmp_path / "all.npy", 0)], tmp_path / "work1", k=10)
    np.testing.assert_allclose(ten.sims, one.sims, atol=1e-5)
    assert (ten.ids == one.ids).all() and (ten.above == one.above).all()
    saved = sorted((tmp_path / "work10").glob("*.topk.npz"))
    assert len(saved) == 10
    runner = CountingRunner()
    again = scan_shards(queries, paths, tmp_path / "work10", k=10, runner=runner)
    assert runner.scanned == [] and (again.ids == ten.ids).all()  # nothing changed: nothing scanned


def test_a_rerun_scans_again_exactly_the_shards_whose_inputs_changed(vectors, tmp_path):
    """Each input of a saved shard result changed in turn: the rerun rescans what it must, and its answer
    equals a fresh run's."""
    queries, corpus = vectors
    parts = np.array_split(corpus, 3)
    paths = []
    for i, rows in enumerate(parts):
        np.save(tmp_path / f"img_emb_{i}.npy", rows.astype(np.float32))
        paths.append((f"img_emb_{i}", tmp_path / f"img_emb_{i}.npy", sum(len(r) for r in parts[:i])))
    work = tmp_path / "work"
    scan_shards(queries, paths, work, k=5)

    def rerun_equals_fresh(expected_scanned, queries=queries, paths=paths, **settings):
        runner = CountingRunner()
        reused = scan_shards(queries, paths, work, runner=runner, **{"k": 5, **settings})
        fresh = scan_shards(queries, paths, tmp_path / f"fresh{len(list(tmp_path.iterdir()))}", **{"k": 5, **settings})
        assert sorted(runner.scanned) == sorted(expected_scanned)
        np.testing.assert_array_equal(reused.ids, fresh.ids)
        np.testing.assert_array_equal(reused.above, fresh.above)
        np.testing.assert_allclose(reused.sims, fresh.sims, atol=1e-6)
        return reused

    all_names = [p.name for _, p, _ in paths]
    rerun_equals_fresh([])
    # Another corpus under the same shard names: one shard's rows replaced, same size.
    np.save(tmp_path / "img_emb_1.npy", np.roll(parts[1], 1, axis=0).astype(np.float32))
    rerun_equals_fresh(["img_emb_1.npy"])
    # A shorter corpus: the last shard cut (no stale ids past its end, no IndexError later).
    np.save(tmp_path / "img_emb_2.npy", parts[2][:5].astype(np.float32))
    rerun_equals_fresh(["img_emb_2.npy"])
    rerun_equals_fresh(all_names, queries=queries[::-1].copy())  # other eval vectors
    rerun_equals_fresh(all_names, k=3)
    rerun_equals_fresh(all_names, count_above=0.5)
    rerun_equals_fresh(all_names, precision="int8" if int8.available() else "float16")
    shifted = [(name, path, offset + 7) for name, path, offset in paths]  # same files, other global ids
    rerun_equals_fresh(all_names, paths=shifted)
    rerun_equals_fresh(all_names, inputs={"corpus_recipe": {"model": "another"}})


def test_small_corpora_pad_and_bad_vectors_fail(vectors):
    queries, corpus = vectors
    few = scan_matrix(queries, corpus[:3], offset=100, k=5)
    assert (few.ids[:, 3:] == -1).all() and set(few.ids[:, :3].ravel()) <= {100, 101, 102}
    broken = corpus[:50].copy()
    broken[17, 3] = np.nan
    with pytest.raises(ValueError, match="corpus row 1017 holds NaN"):
        scan_matrix(queries, broken, offset=1000)
    with pytest.raises(ValueError, match="dimension mismatch"):
        scan_matrix(queries, corpus[:, :32], offset=0)
    with pytest.raises(ValueError, match="k must be at least 1"):
        scan_matrix(queries, corpus, offset=0, k=0)
    unset = queries.copy()
    unset[7, 0] = np.inf
    with pytest.raises(ValueError, match="eval vector 7 holds NaN or infinite"):
        scan_matrix(unset, corpus, offset=0)
    a, b = TopK.empty(2, 3), TopK.empty(2, 3)
    assert (merge(a, b).above == 0).all()
    assert (merge(a, b).ids == -1).all()


def test_clip_retrieval_layout_with_recipe_and_captions(vectors, tmp_path):
    import json
    from dataclasses import asdict

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lmms_contam.corpus.embed import EmbeddingRecipe
    from lmms_contam.corpus.shards import lookup, open_corpus

    queries, corpus = vectors
    (tmp_path / "img_emb").mkdir()
    (tmp_path / "metadata").mkdir()
    parts = np.array_split(corpus, 3)
    for i, rows in enumerate(parts):
        np.save(tmp_path / "img_emb" / f"img_emb_{i}.npy", rows.astype(np.float16))
        start = sum(len(p) for p in parts[:i])
        captions = [f"caption {start + j}" for j in range(len(rows))]
        table = pa.table({"caption": captions, "url": [f"http://img/{start + j}.jpg" for j in range(len(rows))]})
        pq.write_table(table, tmp_path / "metadata" / f"metadata_{i}.parquet")
    with pytest.raises(ValueError, match="no recipe.json"):
        open_corpus(tmp_path)
    recipe = EmbeddingRecipe("open_clip", "ViT-L-14", "openai", "Resize(224)", "float16")
    (tmp_path / "recipe.json").write_text(json.dumps(asdict(recipe)))
    shards, found_recipe = open_corpus(tmp_path)
    assert found_recipe == recipe and [s.offset for s in shards] == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    result = scan_shards(queries, [(s.name, s.vectors, s.offset) for s in shards], tmp_path / "work", k=3)
    matches = lookup(shards, result.ids[:5, 0])
    assert [m["caption"] for m in matches] == ["caption 10", "caption 999", "caption 2500", "caption 4000",
                                               "caption 4999"]  # fmt: skip
    assert matches[0]["url"] == "http://img/10.jpg"


def crowd_around(queries, corpus, seed=5):
    """Hard cases for a reduced product: near-copies of one row, half above the returned threshold and
    densely packed around it, and exact duplicates."""
    rng = np.random.default_rng(seed)
    crowd = unit(corpus[10] + rng.normal(scale=0.012, size=(300, 64)))
    hard = np.concatenate([corpus, crowd, corpus[[999, 999, 2500]]]).astype(np.float32)
    return hard, float(np.median(crowd @ queries[0]))


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_reduced_precision_with_the_exact_recheck_gives_the_exact_result(vectors, precision):
    queries, corpus = vectors
    hard, threshold = crowd_around(queries, corpus)
    exact = scan_matrix(queries, hard, offset=0, k=10, chunk=1000, count_above=threshold)
    reduced = scan_matrix(queries, hard, offset=0, k=10, chunk=1000, count_above=threshold, precision=precision)
    assert 0 < exact.above[0] < 300, "the crowd must straddle the threshold for this test to mean anything"
    assert (reduced.ids == exact.ids).all() and (reduced.above == exact.above).all()
    np.testing.assert_allclose(reduced.sims, exact.sims, atol=1e-6)
    # Without the re-check, reduced precision alone misorders this crowd.
    import torch

    raw = (torch.from_numpy(queries[:1]).to(getattr(torch, precision)) @ torch.from_numpy(hard).to(
        getattr(torch, precision)).T).float().numpy()[0]  # fmt: skip
    assert not np.array_equal(np.argsort(-raw, kind="stable")[:10], exact.ids[0])
    with pytest.raises(ValueError, match="precision must be one of"):
        scan_matrix(queries, hard, offset=0, precision="int4")


def test_int8_products_with_the_exact_recheck_give_the_exact_result(vectors):
    from lmms_contam.corpus.int8 import EVAL_LEVELS, NARROW, quantize

    queries, corpus = vectors
    hard, threshold = crowd_around(queries, corpus)
    found = scan_matrix(queries, hard, offset=0, k=10, chunk=1000, count_above=threshold, precision="int8")
    sims, ids = brute(queries, hard, 10)
    assert (found.ids == ids).all()
    np.testing.assert_allclose(found.sims, sims, atol=1e-6)
    exact_above = (queries.astype(np.float64) @ hard.T.astype(np.float64) > threshold).sum(axis=1)
    assert 0 < exact_above[0] < 300 and (found.above == exact_above).all()
    # The integer products alone misorder this crowd: the re-check is what makes the result exact.
    centre = np.zeros(queries.shape[1], np.float32)
    evals, corpus_side = quantize(queries[:1], centre, EVAL_LEVELS), quantize(hard, centre, *NARROW)
    raw = (evals.levels * evals.scales[:, None]) @ ((corpus_side.levels.astype(np.float64) - NARROW[1])
                                                    * corpus_side.scales[:, None]).T  # fmt: skip
    assert not np.array_equal(np.argsort(-raw[0], kind="stable")[:10], ids[0])
    with pytest.raises(ValueError, match="int8 runs on the CPU"):
        scan_matrix(queries, hard, offset=0, precision="int8", device="cuda")


@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("scheme", ["NARROW", "WIDE"])
def test_int8_error_bound_holds_for_every_pair_and_levels_stay_in_range(scheme, centred):
    from lmms_contam.corpus import int8

    rng = np.random.default_rng(3)
    shared = unit(rng.normal(size=(1, 96)))
    rows = unit(0.8 * shared + 0.6 * unit(rng.normal(size=(300, 96))))  # one common direction, as CLIP's
    rows[0] = 0  # a zero vector
    rows[1] = unit(np.eye(96)[:1] * 40 + rng.normal(size=(1, 96)))  # one dominant element: a coarse scale
    rows[2] *= 1e-40  # too small for a float32 scale
    rows[3] *= 3.5  # not unit length
    rows = rows.astype(np.float32)
    centre = rows[4:].mean(axis=0) if centred else np.zeros(96, np.float32)
    rows[5] = centre  # a row equal to the centre
    levels, zero_point = getattr(int8, scheme)
    evals, corpus = int8.quantize(rows, centre, int8.EVAL_LEVELS), int8.quantize(rows, centre, levels, zero_point)
    x = evals.levels * evals.scales[:, None].astype(np.float64)
    y = (corpus.levels.astype(np.float64) - zero_point) * corpus.scales[:, None]
    exact = rows.astype(np.float64) @ rows.T.astype(np.float64)
    (slack, norm, eval_shift, _), (_, error, quantized_norm, corpus_shift, _) = (
        evals.eval_bounds(),
        corpus.corpus_bounds(centre),
    )
    estimate = x @ y.T + eval_shift[:, None] + corpus_shift[None, :]
    bound = slack[:, None] * quantized_norm[None, :] + norm[:, None] * error[None, :]
    # An upper bound, which the screen relies on (1e-15: float32 underflow of the 1e-40 row's terms), and the
    # estimate above the exact value by no more than its rounding slack.
    assert (exact <= estimate + bound + 1e-15).all() and (estimate - exact <= bound + 1e-4).all()
    # Tight enough for unit vectors that the screen dismisses most entries, and tighter centred and in 8 bits.
    assert np.median(bound[6:, 6:]) < {("NARROW", False): 0.05, ("WIDE", False): 0.035}.get((scheme, centred), 0.02)
    assert np.abs(evals.levels.astype(int)).max() == int8.EVAL_LEVELS and np.isfinite(evals.scales).all()
    # Corpus levels within zero point +- levels: 7 bits never overflow an int16 sum of two products.
    assert corpus.levels.min() >= zero_point - levels and corpus.levels.max() <= zero_point + levels
    assert (corpus.levels[5] == zero_point).all() and (corpus.levels[0] == zero_point).all() != centred


def test_onednn_int8_tiles_are_the_exact_integer_products_and_a_wrong_engine_is_stopped(vectors):
    from lmms_contam.corpus.int8 import WIDE, Int8Tiles, _exact_at
    from lmms_contam.corpus.screen import seed_floors

    queries, corpus = vectors
    tiles = Int8Tiles(queries, [(0, 15), (15, len(queries))], 64)
    # This machine's oneDNN multiplies 8-bit activations exactly where it has VNNI (or AMX), and so its scan uses them.
    vnni = any(flag in Path("/proc/cpuinfo").read_text().split() for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))
    assert _exact_at(WIDE, (0, 15), 64, queries.shape[1]) == vnni and (tiles.corpus_levels, tiles.zero_point) == (
        WIDE if vnni else (63, 64)
    )
    blocks, bounds = tiles.quantize_corpus(corpus[:200])
    integers = (blocks.levels.astype(np.int64) - tiles.zero_point) @ tiles.eval.levels.T.astype(np.int64)
    seen = 0
    for first, last, column, tile in tiles(blocks):
        expected = integers[column : column + len(tile), first:last] * tiles.eval.scales[first:last].astype(np.float64)
        np.testing.assert_allclose(tile, expected, rtol=2.0**-22, atol=0)
        seen += tile.size
        # Seeds: each eval row's k-th largest lower bound in the tile, never above its exact k-th best there.
        seeds = np.full((last - first, 5), -np.inf, dtype=np.float32)
        seed_floors(tile, bounds[:, column:], tiles.eval_bounds[:, first:last], seeds)
        exact = np.sort(queries[first:last].astype(np.float64) @ corpus[column : column + len(tile)].T, axis=1)
        assert (seeds[:, -1] <= exact[:, -5]).all() and (seeds[:, -1] > exact[:, -5] - 0.05).all()
    assert seen == integers.size and tiles.checked
    with pytest.raises(RuntimeError, match="not the exact integer products"):
        tiles._check(tile[0] + 1.0, blocks.levels[column], first, last)
