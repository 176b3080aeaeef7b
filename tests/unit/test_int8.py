"""The int8 scan's corpus side: float16 decoding, finiteness checks, reused buffers and eval tiles."""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from lmms_contam.corpus import int8
from lmms_contam.corpus.scan import scan_matrix, tile_layout


@pytest.fixture(autouse=True)
def onednn() -> None:
    """Checked when a test runs, not at collection: the unit tier collects without importing torch."""
    if not int8.available():
        pytest.skip("torch without oneDNN (not an x86 build)")


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def every_finite_half() -> np.ndarray:
    """All 63,488 finite float16 values (zeros, subnormals, both signs, the extremes), as rows of 128."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    halves = bits.view(np.float16)
    return halves[np.isfinite(halves)].reshape(-1, 128)


def test_float16_rows_are_decoded_exactly_and_quantized_as_their_float32_values():
    halves = every_finite_half()
    rng = np.random.default_rng(5)
    halves = halves[:, rng.permutation(128)]  # mix magnitudes within rows
    centre = rng.normal(size=128).astype(np.float32)
    from_halves = int8.quantize(halves, centre, *int8.WIDE)
    from_floats = int8.quantize(halves.astype(np.float32), centre, *int8.WIDE)
    # Bit for bit, so -0.0 and every subnormal count.
    assert (from_halves.rows.view(np.uint32) == halves.astype(np.float32).view(np.uint32)).all()
    for field in ("levels", "scales", "errors", "norms", "quantized_norms", "offsets", "offset_errors"):
        np.testing.assert_array_equal(getattr(from_halves, field), getattr(from_floats, field), err_msg=field)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 1e300])
def test_a_nan_or_infinite_corpus_value_is_refused_by_its_row(dtype, bad):
    rng = np.random.default_rng(1)
    queries, corpus = unit(rng.normal(size=(6, 32))), unit(rng.normal(size=(300, 32))).astype(dtype)
    scan_matrix(queries, corpus, offset=0, precision="int8")
    kept, corpus[3, 0] = corpus[3, 0], np.finfo(np.float16).max  # finite, but no unit vector: no cosine
    with pytest.raises(ValueError, match=r"corpus row 1003 has length 6.55e\+04, not 1"):
        scan_matrix(queries, corpus, offset=1000, chunk=100, precision="int8")
    corpus[3, 0] = kept
    if dtype != np.float64 and bad == 1e300:
        return  # not representable: float16 and float32 hold it as inf, covered above
    corpus[211, 7] = bad
    with pytest.raises(ValueError, match="corpus row 1211 holds NaN or infinite values"):
        scan_matrix(queries, corpus, offset=1000, chunk=100, precision="int8")


def test_int8_scan_of_messy_float16_shards_equals_brute_force_on_their_values():
    rng = np.random.default_rng(2)
    queries = unit(rng.normal(size=(37, 96)) + 2.0)  # a shared direction, as CLIP's
    corpus = unit(rng.normal(size=(3000, 96)) + 2.0).astype(np.float16)
    corpus[5:10] = unit(queries[:5] + rng.normal(scale=0.01, size=(5, 96)))  # near-copies
    corpus[20] = 0  # zero row (a dump's placeholder: allowed)
    corpus[21] = -0.0
    corpus[22] = np.float16(6e-8)  # subnormal values beside one of 1: a unit row on the coarsest scale
    corpus[22, 3] = 1.0
    corpus[23] = 1 / np.sqrt(96)  # constant
    corpus[24:30] = corpus[5]  # exact duplicates: ties broken by id
    found = scan_matrix(queries, corpus, offset=0, k=8, chunk=701, count_above=0.9, precision="int8")
    exact = queries.astype(np.float64) @ corpus.astype(np.float64).T
    order = np.argsort(-exact.astype(np.float32), axis=1, kind="stable")[:, :8]
    assert (found.ids == order).all()
    np.testing.assert_allclose(found.sims, np.take_along_axis(exact, order, axis=1), atol=1e-6)
    assert (found.above == (exact > 0.9).sum(axis=1)).all()
    assert found.above[0] >= 7 and found.above[1:5].min() >= 1  # the duplicated near-copy, the others


def test_chunk_buffers_are_reused_and_give_the_fresh_results():
    rng = np.random.default_rng(3)
    rows = unit(rng.normal(size=(500, 64))).astype(np.float16)
    centre = rng.normal(scale=0.1, size=64).astype(np.float32)
    buffers = int8.Buffers()
    first = int8.quantize(rows[:300], centre, *int8.WIDE, buffers=buffers)
    first_levels = first.levels.copy()
    second = int8.quantize(rows[300:], centre, *int8.WIDE, buffers=buffers)  # a shorter last chunk
    assert np.shares_memory(first.levels, second.levels) and np.shares_memory(first.rows, second.rows)
    fresh = int8.quantize(rows[300:], centre, *int8.WIDE)
    assert not np.shares_memory(fresh.levels, second.levels)
    np.testing.assert_array_equal(second.levels, fresh.levels)
    np.testing.assert_array_equal(second.errors, fresh.errors)
    np.testing.assert_array_equal(first_levels, int8.quantize(rows[:300], centre, *int8.WIDE).levels)


def test_eval_tiles_are_reused_only_for_the_same_unchanged_rows_and_dropped_with_them():
    rng = np.random.default_rng(4)
    queries, corpus = unit(rng.normal(size=(40, 64))), unit(rng.normal(size=(2000, 64)))
    layout = tile_layout(len(queries))
    with int8.tiles_for(queries, *layout) as first:
        pass
    with int8.tiles_for(queries, *layout) as again:
        assert again is first
        with int8.tiles_for(queries, *layout) as meanwhile:  # a second scan at the same time: its own tiles
            assert meanwhile is not first
    with int8.tiles_for(queries.copy(), *layout) as equal_copy:  # the same rows in another array: reused
        assert equal_copy is first and not np.shares_memory(first.eval.rows, queries)
    before = scan_matrix(queries, corpus, offset=0, precision="int8")
    queries[3] = corpus[77]  # changed in place between two scans: the stale tiles must not be used
    with int8.tiles_for(queries, *layout) as changed:
        assert changed is not first
    after = scan_matrix(queries, corpus, offset=0, precision="int8")
    assert after.ids[3, 0] == 77 and before.ids[3, 0] != 77
    np.testing.assert_allclose(after.sims[3, 0], 1.0, atol=1e-6)
    with int8.tiles_for(queries, layout[0], layout[1] // 2) as other_layout:
        assert other_layout is not changed
    with ThreadPoolExecutor(3) as pool:  # scans in several threads at once: none shares another's tiles
        results = list(pool.map(lambda _: scan_matrix(queries, corpus, 0, precision="int8"), range(3)))
    assert all((result.ids == after.ids).all() for result in results)


def test_eval_tiles_are_dropped_with_the_eval_rows():
    rng = np.random.default_rng(6)
    corpus = unit(rng.normal(size=(500, 32)))

    def scan_a_fresh_eval_set() -> None:
        queries = unit(rng.normal(size=(9, 32)))
        scan_matrix(queries, corpus, offset=0, precision="int8")
        assert int8._idle and int8._idle[0].user() is queries

    scan_a_fresh_eval_set()
    gc.collect()
    assert not int8._idle  # nothing held once the eval rows are gone
