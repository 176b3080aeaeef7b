"""The scan's inner loop: fold one tile of cosines into running per-row top-k lists, compiled.

A tile is read right after its matrix product, while it is still in cache. Almost every entry is
below its row's k-th best so far, so runs of LANES entries are dismissed on their maximum alone and
the few entries that pass are inserted in place: one pass over the tile, where whole-array torch
operations (top-k, masks, gathers) take several passes and allocations per tile. `lmms-contam
bench-scan` measures the scan against the bare products.
"""

from __future__ import annotations

import numba
import numpy as np

LANES = 16  # entries dismissed together on their maximum


@numba.njit(inline="always")
def _insert(row: int, value: float, corpus_id: int, values: np.ndarray, ids: np.ndarray) -> None:
    """Into a row sorted best first, after any equal values, dropping the last."""
    slot = values.shape[1] - 1
    while slot > 0 and values[row, slot - 1] < value:
        values[row, slot] = values[row, slot - 1]
        ids[row, slot] = ids[row, slot - 1]
        slot -= 1
    values[row, slot] = value
    ids[row, slot] = corpus_id


@numba.njit(nogil=True, parallel=True, cache=True)
def screen_tile(
    tile: np.ndarray, first_id: int, values: np.ndarray, ids: np.ndarray, above: np.ndarray, count_above: float
) -> None:
    """Offer each row of `tile` (corpus ids first_id, first_id + 1, ...) to the same row of the sorted
    `values`/`ids` (best first), and count its entries above `count_above` into `above`.

    An entry enters only when strictly better than the row's k-th, after any equal values: ties keep
    the earlier (smaller) id, so results do not depend on how the corpus was cut into tiles or shards.
    """
    n_rows, n_cols = tile.shape
    k = values.shape[1]
    for row in numba.prange(n_rows):
        kth = values[row, k - 1]
        floor = min(kth, count_above)  # nothing at or below it can enter or be counted
        counted = 0
        for start in range(0, n_cols, LANES):
            stop = min(start + LANES, n_cols)
            peak = tile[row, start]
            for col in range(start + 1, stop):
                peak = max(peak, tile[row, col])
            if peak <= floor:
                continue
            for col in range(start, stop):
                value = tile[row, col]
                if value > floor:
                    counted += value > count_above
                    if value > kth:
                        _insert(row, value, first_id + col, values, ids)
                        kth = values[row, k - 1]
                        floor = min(kth, count_above)
        above[row] += counted


GROUP = 256  # eval rows screened together by one thread in an int8 tile: their floors stay in L1


@numba.njit(fastmath={"reassoc", "contract"}, cache=True)
def exact_cosine(a: np.ndarray, b: np.ndarray) -> np.float32:
    """The exact product of two float32 rows, accumulated in float64 (reassociated, so vectorized)."""
    total = 0.0
    for i in range(a.shape[0]):
        total += np.float64(a[i]) * np.float64(b[i])
    return np.float32(total)


SEED_MARGIN = 2.0**-14  # times (1 + the terms' magnitudes): far more than the rounding of a lower bound's sum


@numba.njit(nogil=True, parallel=True, cache=True)
def seed_floors(tile: np.ndarray, corpus_bounds: np.ndarray, eval_bounds: np.ndarray, seeds: np.ndarray) -> None:
    """Each eval row's k-th largest lower bound on its exact cosines in one int8 tile, into `seeds` (k =
    seeds.shape[1]; the k-th is seeds[:, -1]).

    A row's k-th best cannot end below it, so entries whose upper bound is at or under it need no exact
    recomputation even before any exact value has filled the row's top-k: without it a shard's first tile
    recomputes every entry until its rows hold k exact values, and each shard starts empty.
    """
    n_corpus, n_eval = tile.shape
    k = seeds.shape[1]
    unused_ids = np.empty(seeds.shape, np.int64)
    scales, errors, quantized_norms, offsets = corpus_bounds[0], corpus_bounds[1], corpus_bounds[2], corpus_bounds[3]
    offset_widths = corpus_bounds[4]
    for group in numba.prange(-(-n_eval // GROUP)):
        first, last = group * GROUP, min(group * GROUP + GROUP, n_eval)
        slacks, norms, shifts = eval_bounds[0, first:last], eval_bounds[1, first:last], eval_bounds[2, first:last]
        widths = eval_bounds[3, first:last]
        for c in range(n_corpus):
            scale, error, norm, shift = scales[c], errors[c], quantized_norms[c], offsets[c]
            width = offset_widths[c]
            for j in range(last - first):
                estimate = tile[c, first + j] * scale + shifts[j] + shift  # both offsets rounded up
                bound = slacks[j] * norm + norms[j] * error + 2 * (widths[j] + width)
                low = (
                    estimate
                    - bound
                    - SEED_MARGIN * (1.0 + abs(tile[c, first + j] * scale) + abs(shifts[j]) + abs(shift))
                )
                if low > seeds[first + j, k - 1]:
                    _insert(first + j, low, -1, seeds, unused_ids)


@numba.njit(nogil=True, parallel=True, cache=True)
def screen_int8_tile(
    tile: np.ndarray,
    corpus_bounds: np.ndarray,
    first_id: int,
    corpus_rows: np.ndarray,
    eval_bounds: np.ndarray,
    queries: np.ndarray,
    values: np.ndarray,
    ids: np.ndarray,
    above: np.ndarray,
    count_above: float,
    recomputed: np.ndarray,
    seeds: np.ndarray,
) -> None:
    """Offer an int8 tile to the running exact top-k, recomputing exactly every entry that might matter
    (counted per eval row in `recomputed`).

    `tile[c, r]` is corpus row c (id first_id + c, float32 `corpus_rows[c]`) against eval row r
    (`queries[r]`), from their quantized copies centred on a shared vector, and before c's scale. With
    corpus_bounds[:, c] = (scale, |y' - y|, |y'|, its offset rounded up, ...) and eval_bounds[:, r] =
    (|x' - x| + rounding slack, |x|, its offset rounded up, ...), the exact cosine is at most tile * scale
    + (|x' - x| + slack) |y'| + |x| |y' - y|
    plus both offsets (int8.Quantized). An entry whose bound is at most min(row's k-th best, count_above)
    can neither enter nor be counted, nor can one at most min(`seeds[r]`, count_above), a lower bound on
    the row's k-th best (seed_floors); every other one is recomputed from the float32 rows, then inserted
    and counted exactly as `screen_tile` does.
    """
    n_corpus, n_eval = tile.shape
    k = values.shape[1]
    scales, errors, quantized_norms, offsets = corpus_bounds[0], corpus_bounds[1], corpus_bounds[2], corpus_bounds[3]
    for group in numba.prange(-(-n_eval // GROUP)):
        first, last = group * GROUP, min(group * GROUP + GROUP, n_eval)
        # Loops over views from 0: indices known non-negative, so the compiler vectorizes them.
        slacks, norms, shifts = eval_bounds[0, first:last], eval_bounds[1, first:last], eval_bounds[2, first:last]
        floors = np.empty(last - first, dtype=np.float32)
        for j in range(last - first):
            floors[j] = min(max(values[first + j, k - 1], seeds[first + j]), count_above)
        for c in range(n_corpus):
            scale, error, norm, shift = scales[c], errors[c], quantized_norms[c], offsets[c]
            products = tile[c, first:last]
            hits = 0
            for j in range(last - first):
                hits += products[j] * scale + slacks[j] * norm + norms[j] * error + shifts[j] + shift > floors[j]
            if hits == 0:
                continue
            for j in range(last - first):
                if products[j] * scale + slacks[j] * norm + norms[j] * error + shifts[j] + shift > floors[j]:
                    row = first + j
                    recomputed[row] += 1
                    value = exact_cosine(queries[row], corpus_rows[c])
                    above[row] += value > count_above
                    if value > values[row, k - 1]:
                        _insert(row, value, first_id + c, values, ids)
                    floors[j] = min(max(values[row, k - 1], seeds[row]), count_above)
