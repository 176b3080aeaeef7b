"""The CPU scan's fast products: 8-bit integers through oneDNN, with a rigorous error bound per entry.

A CPU without fast float16 multiplies 8-bit integers several times faster than float32. Each vector
is quantized on its own scale and the distance of its quantized copy x' from it is kept, so every
product's error is bounded: |x'.y' - x.y| <= |x' - x| |y'| + |x| |y' - y|. Entries that could be
within that bound of their row's k-th best or of the counting threshold are recomputed from the
float32 vectors (screen.screen_int8_tile): the results are the exact scan's.

The integer products themselves must be exact. oneDNN is given the quantized values as they are
(activation scale 1, no re-quantization), and the corpus side uses 7 bits (values 1-127 around a
zero point of 64) so that no pair of products overflows the int16 sums of CPUs without VNNI. The
first tile of every scan is compared with an integer product computed here, and a mismatch stops it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

EVAL_LEVELS = 127  # int8 weights in [-127, 127]
CORPUS_LEVELS = 63  # uint8 activations in [1, 127] around ZERO_POINT
ZERO_POINT = 64
ROUNDING_SLACK = 2.0**-18  # times |x'| |y'|: float32 scaling of the integer products, float64 re-check sums


@numba.njit(nogil=True, parallel=True, cache=True)
def _quantize(
    rows: np.ndarray,
    levels: int,
    shift: int,
    out: np.ndarray,
    scales: np.ndarray,
    errors: np.ndarray,
    norms: np.ndarray,
    quantized_norms: np.ndarray,
) -> None:
    """Row i to round(x / s) + shift with s = max |x| / levels; keeps s, |q s - x|, |x| and |q s|."""
    for i in numba.prange(rows.shape[0]):
        peak = 0.0
        for j in range(rows.shape[1]):
            peak = max(peak, abs(np.float64(rows[i, j])))
        scale = np.float32(peak / levels)
        if scale == 0:  # a zero row, or one too small for a float32 scale: all levels 0, its error exact
            scale = np.float32(1.0)
        error, norm, quantized_norm = 0.0, 0.0, 0.0
        for j in range(rows.shape[1]):
            value = np.float64(rows[i, j])
            level = min(max(np.rint(value / scale), -levels), levels)
            out[i, j] = level + shift
            dequantized = level * np.float64(scale)
            error += (dequantized - value) ** 2
            norm += value * value
            quantized_norm += dequantized * dequantized
        scales[i] = scale
        errors[i], norms[i], quantized_norms[i] = np.sqrt(error), np.sqrt(norm), np.sqrt(quantized_norm)


@dataclass(frozen=True)
class Quantized:
    """Rows as integers on per-row scales, with what the error bound needs."""

    levels: np.ndarray  # (n, d) int8, or uint8 shifted by ZERO_POINT
    scales: np.ndarray  # (n,) float32: row i is about levels[i] * scales[i]
    errors: np.ndarray  # (n,) |dequantized - original|
    norms: np.ndarray  # (n,) |original|
    quantized_norms: np.ndarray  # (n,) |dequantized|

    def corpus_bounds(self) -> np.ndarray:
        """(scale, |y' - y|, |y'|) per corpus row, as screen_int8_tile reads them."""
        return np.stack([self.scales, self.errors, self.quantized_norms]).astype(np.float32)

    def eval_bounds(self) -> np.ndarray:
        """(|x' - x| + rounding slack, |x|) per eval row, as screen_int8_tile reads them."""
        return np.stack([self.errors + ROUNDING_SLACK * self.quantized_norms, self.norms]).astype(np.float32)


def quantize(rows: np.ndarray, corpus_side: bool) -> Quantized:
    levels, shift, dtype = (CORPUS_LEVELS, ZERO_POINT, np.uint8) if corpus_side else (EVAL_LEVELS, 0, np.int8)
    n = len(rows)
    result = Quantized(
        levels=np.empty(rows.shape, dtype),
        scales=np.empty(n, np.float32),
        errors=np.empty(n),
        norms=np.empty(n),
        quantized_norms=np.empty(n),
    )
    _quantize(rows, levels, shift, result.levels, result.scales, result.errors, result.norms, result.quantized_norms)
    return result


def available() -> bool:
    """Whether this torch build has oneDNN's int8 linear (x86 builds do)."""
    import torch

    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.onednn, "qlinear_pointwise")


def _engine():
    if not available():
        raise ValueError("precision int8 needs torch built with oneDNN (x86 CPUs); use float32")
    import torch

    return torch.ops.onednn


class Int8Tiles:
    """Integer products of the quantized eval rows with a corpus block, a cache-sized tile at a time.

    Tiles are transposed (corpus rows x eval rows): oneDNN packs the eval rows once, as weights, and
    streams corpus rows through them as activations.
    """

    def __init__(self, queries: np.ndarray, row_blocks: list[tuple[int, int]], width: int):
        import torch

        self.onednn = _engine()
        self.eval = quantize(queries, corpus_side=False)
        self.row_blocks, self.width = row_blocks, width
        shape = [width, queries.shape[1]]  # the activations' shape, which oneDNN's packing is chosen for
        self.packed = [
            self.onednn.qlinear_prepack(torch.from_numpy(self.eval.levels[first:last]), shape)
            for first, last in row_blocks
        ]
        self.weight_scales = torch.from_numpy(self.eval.scales)
        self.eval_bounds = self.eval.eval_bounds()
        self.checked = False

    def __call__(self, corpus: Quantized) -> Iterator[tuple[int, int, int, np.ndarray]]:
        """(first eval row, last, first block row, tile) for each tile of a quantized corpus block."""
        import torch

        activations = torch.from_numpy(corpus.levels)
        for (first, last), packed in zip(self.row_blocks, self.packed, strict=True):
            zeros = torch.zeros(last - first, dtype=torch.long)
            for column in range(0, len(activations), self.width):
                stop = min(column + self.width, len(activations))
                tile = self.onednn.qlinear_pointwise(
                    activations[column:stop],
                    1.0,
                    ZERO_POINT,
                    packed,
                    self.weight_scales[first:last],
                    zeros,
                    None,
                    1.0,
                    0,
                    torch.float32,
                    "none",
                    [],
                    "",
                ).numpy()
                if not self.checked:
                    self._check(tile[0], corpus.levels[column], first, last)
                yield first, last, column, tile

    def _check(self, products: np.ndarray, corpus_levels: np.ndarray, first: int, last: int) -> None:
        """One corpus row's products against integer arithmetic done here: an engine that saturates or
        re-quantizes would make the error bound false, so it stops the scan."""
        levels = corpus_levels.astype(np.int64) - ZERO_POINT
        expected = (self.eval.levels[first:last].astype(np.int64) @ levels) * self.eval.scales[first:last].astype(
            np.float64
        )
        if not np.allclose(products, expected, rtol=2.0**-20, atol=0):
            raise RuntimeError("oneDNN's int8 products are not the exact integer products here; use precision float32")
        self.checked = True
