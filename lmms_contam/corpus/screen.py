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
def screen_tile(tile: np.ndarray, first_id: int, values: np.ndarray, ids: np.ndarray, above: np.ndarray,
                count_above: float) -> None:  # fmt: skip
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
