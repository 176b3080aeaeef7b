"""What every corpus row must be before a product with it means a cosine: finite, and of unit length.

A dump of unnormalised vectors, or integers, gives "similarities" of 5.9 or 75.9 and flags every eval image;
each scan path measures its rows as it decodes them (no extra pass over the shard) and refuses the first bad
one by its global id.
"""

from __future__ import annotations

import numpy as np

# |x|^2 within 2% of 1: float16 storage of a unit vector is off by 1e-3 at most; an exactly zero row (a dump's
# placeholder for an image that failed) has cosine 0 with everything and is allowed.
UNIT_TOLERANCE = 0.02


def check_rows(nonfinite: np.ndarray, squared_norms: np.ndarray, first_id: int) -> None:
    """Raise ValueError naming the first row (by global id) that holds NaN or inf, or is not of unit length."""
    bad = np.flatnonzero(nonfinite)
    if len(bad):
        raise ValueError(f"corpus row {first_id + int(bad[0])} holds NaN or infinite values")
    off = np.flatnonzero((np.abs(squared_norms - 1.0) > UNIT_TOLERANCE) & (squared_norms != 0))
    if len(off):
        length = float(np.sqrt(squared_norms[off[0]]))
        raise ValueError(
            f"corpus row {first_id + int(off[0])} has length {length:.4g}, not 1: the scan compares unit vectors "
            "(L2-normalised embeddings, as recipe.json's `normalized` says); normalise the shards first"
        )
