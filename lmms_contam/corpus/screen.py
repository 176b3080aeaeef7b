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
) -> None:
    """Offer an int8 tile to the running exact top-k, recomputing exactly every entry that might matter
    (counted per eval row in `recomputed`).

    `tile[c, r]` is corpus row c (id first_id + c, float32 `corpus_rows[c]`) against eval row r
    (`queries[r]`), from their quantized copies and before c's scale. With corpus_bounds[:, c] = (scale,
    |y' - y|, |y'|) and eval_bounds[:, r] = (|x' - x| + rounding slack, |x|), the exact cosine is at most
    tile * scale + (|x' - x| + slack) |y'| + |x| |y' - y|. An entry whose bound is at most
    min(row's k-th best, count_above) can neither enter nor be counted; every other one is recomputed from
    the float32 rows, then inserted and counted exactly as `screen_tile` does.
    """
    n_corpus, n_eval = tile.shape
    k = values.shape[1]
    for group in numba.prange(-(-n_eval // GROUP)):
        first, last = group * GROUP, min(group * GROUP + GROUP, n_eval)
        # Loops over views from 0: indices known non-negative, so the compiler vectorizes them.
        slacks, norms = eval_bounds[0, first:last], eval_bounds[1, first:last]
        floors = np.empty(last - first, dtype=np.float32)
        for j in range(last - first):
            floors[j] = min(values[first + j, k - 1], count_above)
        for c in range(n_corpus):
            scale, error, norm = corpus_bounds[0, c], corpus_bounds[1, c], corpus_bounds[2, c]
            products = tile[c, first:last]
            hits = 0
            for j in range(last - first):
                hits += products[j] * scale + slacks[j] * norm + norms[j] * error > floors[j]
            if hits == 0:
                continue
            for j in range(last - first):
                if products[j] * scale + slacks[j] * norm + norms[j] * error > floors[j]:
                    row = first + j
                    recomputed[row] += 1
                    value = exact_cosine(queries[row], corpus_rows[c])
                    above[row] += value > count_above
                    if value > values[row, k - 1]:
                        _insert(row, value, first_id + c, values, ids)
                    floors[j] = min(values[row, k - 1], count_above)
