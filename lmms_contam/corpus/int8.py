"""The CPU scan's fast products: 8-bit integers through oneDNN, with a rigorous error bound per entry.

A CPU without fast float16 multiplies 8-bit integers several times faster than float32. Both sides are
first centred on the eval rows' mean (CLIP embeddings share a direction, so the centred vectors are
shorter and quantize finer; the offsets this takes out are added back exactly), then each vector is
quantized on its own scale and the distance of its quantized copy x' from it is kept, so every
product's error is bounded: |x'.y' - x.y| <= |x' - x| |y'| + |x| |y' - y|. Entries that could be
within that bound of their row's k-th best or of the counting threshold are recomputed from the
float32 vectors (screen.screen_int8_tile): the results are the exact scan's.

The integer products themselves must be exact. oneDNN is given the quantized values as they are
(activation scale 1, no re-quantization). The corpus side uses 8 bits (1-255 around a zero point of
128) where a probe at the scan's tile shape shows the products exact at the extreme levels (CPUs with
VNNI sum in int32), else 7 bits (1-127 around 64), so that no pair of products overflows the int16
sums of CPUs without it. The first tile of every scan is compared with an integer product computed
here, and a mismatch stops it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

from lmms_contam.corpus.row_checks import check_rows

EVAL_LEVELS = 127  # int8 weights in [-127, 127]
NARROW = (63, 64)  # corpus levels and zero point without VNNI: uint8 in [1, 127], no int16 pair sum overflows
WIDE = (127, 128)  # with VNNI, which sums in int32: uint8 in [1, 255], twice as fine
ROUNDING_SLACK = 2.0**-18  # times the terms' magnitudes: float32 scaling and sums of the products, float64 re-checks


UNIT = 2.0**-24  # float32's unit roundoff
FLOAT32_MAX = np.float32(np.finfo(np.float32).max)
STATS = 7  # per row: scale, error, norm, quantized norm, offset, offset error (Quantized's fields), |x|^2


@numba.njit(nogil=True, fastmath={"reassoc", "contract"}, cache=True)
def _quantize_row(row: np.ndarray, centre: np.ndarray, levels: int, zero: np.float32, out, stats) -> int:
    """Row x minus the centre c to round((x - c) / s) + zero with s = max |x - c| / levels, in float32 (16
    lanes a vector). Writes s and upper bounds on |q s - (x - c)| and |x - c|, |q s|, x.c and a bound on
    that product's error into `stats`: every float32 rounding is accounted for, so the bounds are rigorous;
    and |x|^2, which the caller checks.
    Returns how many of the row's values are NaN or infinite (the bounds then mean nothing)."""
    dim = row.shape[0]
    growth = 1.0 / (1.0 - dim * UNIT)  # a float32 sum of d non-negative terms is at least this fraction short
    peak, nonfinite, length = np.float32(0.0), 0, np.float32(0.0)
    for j in range(dim):
        peak = max(peak, abs(row[j] - centre[j]))
        nonfinite += not abs(row[j]) <= FLOAT32_MAX
        length += row[j] * row[j]
    scale = np.float32(peak / np.float32(levels))
    if not scale > 0:  # a row equal to the centre, or too close for a float32 scale: all levels 0, its error exact
        scale = np.float32(1.0)
    inverse = np.float32(1.0) / scale  # any level is sound: its error is measured
    error, norm, offset, offset_size = np.float32(0.0), np.float32(0.0), np.float32(0.0), np.float32(0.0)
    squares = np.float32(0.0)
    for j in range(dim):
        value = row[j] - centre[j]  # rounded: within UNIT |x - c| of the exact difference
        level = min(max(np.rint(value * inverse), np.float32(-levels)), np.float32(levels))
        out[j] = level + zero
        missed = level * scale - value  # within UNIT (|q s| + |missed|) of q s - value
        error += missed * missed
        norm += value * value
        squares += level * level  # integers: exact until the sum passes 2^24
        product = row[j] * centre[j]
        offset += product
        offset_size += abs(product)
    value_norm = np.sqrt(np.float64(norm) * growth) / (1.0 - UNIT)
    quantized_norm = np.float64(scale) * np.sqrt(np.float64(squares) * growth)
    # |q s - (x - c)| <= |missed| + UNIT (|q s| + |missed|) + UNIT |x - c|, summed as vectors.
    missed_norm = np.sqrt(np.float64(error) * growth)
    stats[0] = scale
    stats[1] = missed_norm * (1.0 + UNIT) + UNIT * (quantized_norm + value_norm)
    stats[2], stats[3], stats[4] = value_norm, quantized_norm, offset
    stats[5] = (dim + 2) * UNIT * np.float64(offset_size) * growth
    stats[6] = length
    return nonfinite


@numba.njit(nogil=True, parallel=True, cache=True)
def _quantize(rows: np.ndarray, centre: np.ndarray, levels: int, shift: int, out, stats, nonfinite) -> None:
    """float32 rows, each by _quantize_row, on every core."""
    for i in numba.prange(rows.shape[0]):
        nonfinite[i] = _quantize_row(rows[i], centre, levels, np.float32(shift), out[i], stats[i])


@numba.njit(nogil=True, cache=True)
def _decode_halves(halves: np.ndarray, out: np.ndarray) -> None:
    """IEEE half-precision bits to float32, exactly (numba has no float16): normal and non-finite values by
    moving their fields, zeros and subnormals as m 2^-24."""
    bits = out.view(np.uint32)
    for j in range(halves.shape[0]):
        half = np.uint32(halves[j])
        exponent = (half >> 10) & 0x1F
        fields = ((half & 0x8000) << 16) | ((half & 0x3FF) << 13)
        bits[j] = fields | (np.uint32(0x7F800000) if exponent == 31 else (exponent + 112) << 23)
    for j in range(halves.shape[0]):
        if halves[j] & 0x7C00 == 0:
            magnitude = np.float32(halves[j] & 0x3FF) * np.float32(UNIT)
            out[j] = -magnitude if halves[j] & 0x8000 else magnitude


@numba.njit(nogil=True, parallel=True, cache=True)
def _quantize_halves(halves: np.ndarray, centre: np.ndarray, levels: int, shift: int, decoded, out, stats, nonfinite):
    """float16 rows (as their bits) decoded into `decoded` and quantized while in cache: one pass over the
    shard's memory where a cast, a finiteness check and the quantization took three."""
    for i in numba.prange(halves.shape[0]):
        _decode_halves(halves[i], decoded[i])
        nonfinite[i] = _quantize_row(decoded[i], centre, levels, np.float32(shift), out[i], stats[i])


@dataclass(frozen=True)
class Quantized:
    """Rows minus a shared centre c, as integers on per-row scales, with what the error bound needs.

    x.y = (x - c).(y - c) + x.c + y.c - c.c: the integer product approximates the first term, on vectors
    shorter than x and y when c is their common direction (CLIP embeddings share one), so the bound is
    tighter and fewer entries need the exact re-check.
    """

    rows: np.ndarray  # (n, d) float32: the rows themselves (float16 ones decoded), for the exact re-check
    levels: np.ndarray  # (n, d) int8, or uint8 shifted by the zero point
    scales: np.ndarray  # (n,) float32: row i - c is about levels[i] * scales[i]
    errors: np.ndarray  # (n,) at least |dequantized - (original - c)|
    norms: np.ndarray  # (n,) at least |original - c|
    quantized_norms: np.ndarray  # (n,) |dequantized|
    offsets: np.ndarray  # (n,) original . c, summed in float32
    offset_errors: np.ndarray  # (n,) at least |offsets - original . c|

    def corpus_bounds(self, centre: np.ndarray) -> np.ndarray:
        """(scale, |y' - y|, |y'|, y.c - c.c rounded up, how far up) per corpus row, as screen_int8_tile and
        seed_floors read them."""
        shift = self.offsets - float(np.dot(centre.astype(np.float64), centre.astype(np.float64)))
        width = self.offset_errors + ROUNDING_SLACK * (np.abs(shift) + np.abs(self.offsets))
        return np.stack([self.scales, self.errors, self.quantized_norms, shift + width, width]).astype(np.float32)

    def eval_bounds(self) -> np.ndarray:
        """(|x' - x| + rounding slack, |x|, x.c rounded up, how far up) per eval row, as screen_int8_tile and
        seed_floors read them."""
        width = self.offset_errors + ROUNDING_SLACK * np.abs(self.offsets)
        slack = self.errors + ROUNDING_SLACK * self.quantized_norms
        return np.stack([slack, self.norms, self.offsets + width, width]).astype(np.float32)


class Buffers:
    """Arrays reused from chunk to chunk: a fresh chunk-sized array would cost a page fault per 4 KiB on first
    touch, for every chunk."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        held = self.arrays.get(name)
        if held is None or held.dtype != dtype or held.shape[1:] != shape[1:] or len(held) < shape[0]:
            held = self.arrays[name] = np.empty(shape, dtype)
        return held[: shape[0]]


def quantize(
    rows: np.ndarray,
    centre: np.ndarray,
    levels: int,
    zero_point: int = 0,
    first_id: int = 0,
    buffers: Buffers | None = None,
    unit: bool = False,
) -> Quantized:
    """int8 levels in [-levels, levels] (eval rows), or uint8 ones shifted by zero_point (corpus rows).

    float16 rows are decoded here; other dtypes are cast to float32. A row holding NaN or infinite values
    is refused by its id (first_id + its index: eval rows are checked before they get here), and with `unit`
    (corpus rows) one not of unit length. With
    `buffers`, the result's arrays are theirs, valid until the next call with the same buffers.
    """
    rows, buffers = np.ascontiguousarray(rows), buffers or Buffers()
    centre = np.asarray(centre, np.float32)
    levels_out = buffers.get("levels", rows.shape, np.uint8 if zero_point else np.int8)
    stats, nonfinite = (
        buffers.get("stats", (len(rows), STATS), np.float64),
        buffers.get("nonfinite", rows.shape[:1], np.int64),
    )
    if rows.dtype == np.float16:
        values = buffers.get("rows", rows.shape, np.float32)
        _quantize_halves(rows.view(np.uint16), centre, levels, zero_point, values, levels_out, stats, nonfinite)
    else:
        with np.errstate(over="ignore"):  # a value too large for float32 becomes inf: refused below
            values = np.asarray(rows, np.float32)
        _quantize(values, centre, levels, zero_point, levels_out, stats, nonfinite)
    check_rows(nonfinite, stats[:, 6] if unit else np.ones(len(rows)), first_id)
    scales, errors, norms, quantized_norms, offsets, offset_errors, _ = stats.T
    return Quantized(
        rows=values,
        levels=levels_out,
        scales=scales.astype(np.float32),
        errors=errors,
        norms=norms,
        quantized_norms=quantized_norms,
        offsets=offsets,
        offset_errors=offset_errors,
    )


def available() -> bool:
    """Whether this torch build has oneDNN's int8 linear (x86 builds do)."""
    import torch

    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.onednn, "qlinear_pointwise")


def _engine():
    if not available():
        raise ValueError("precision int8 needs torch built with oneDNN (x86 CPUs); use float32")
    import torch

    return torch.ops.onednn


def _product(activations, zero_point: int, packed, weight_scales) -> np.ndarray:
    """oneDNN's integer products of uint8 activations with packed int8 weights, each weight row scaled."""
    import torch

    return torch.ops.onednn.qlinear_pointwise(
        activations,
        1.0,
        zero_point,
        packed,
        weight_scales,
        torch.zeros(len(weight_scales), dtype=torch.long),
        None,
        1.0,
        0,
        torch.float32,
        "none",
        [],
        "",
    ).numpy()


@functools.cache
def _exact_at(scheme: tuple[int, int], row_block: tuple[int, int], width: int, dim: int) -> bool:
    """Whether a tile of the scan's shape gives exact integer products at the extremes of these corpus
    levels: CPUs without VNNI sum pairs of products in saturating int16 and do not."""
    import torch

    levels, zero_point = scheme
    weights = np.full((row_block[1] - row_block[0], dim), EVAL_LEVELS, np.int8)
    weights[1::2] = -EVAL_LEVELS
    activations = np.full((width, dim), zero_point + levels, np.uint8)
    activations[1::2] = zero_point - levels
    packed = _engine().qlinear_prepack(torch.from_numpy(weights), [width, dim])
    found = _product(torch.from_numpy(activations), zero_point, packed, torch.ones(len(weights)))
    expected = np.outer(activations[:, 0].astype(np.int64) - zero_point, weights[:, 0]) * dim  # constant rows
    return bool(np.allclose(found, expected, rtol=2.0**-20, atol=0))


class Int8Tiles:
    """Integer products of the quantized eval rows with a corpus block, a cache-sized tile at a time.

    Tiles are transposed (corpus rows x eval rows): oneDNN packs the eval rows once, as weights, and
    streams corpus rows through them as activations. Both sides are centred on the eval rows' mean.
    """

    def __init__(self, queries: np.ndarray, row_blocks: list[tuple[int, int]], width: int):
        import torch

        self.onednn = _engine()
        self.centre = queries.mean(axis=0, dtype=np.float64).astype(np.float32)
        self.eval = quantize(queries, self.centre, EVAL_LEVELS)
        self.row_blocks, self.width = row_blocks, width
        shape = [width, queries.shape[1]]  # the activations' shape, which oneDNN's packing is chosen for
        self.packed = [
            self.onednn.qlinear_prepack(torch.from_numpy(self.eval.levels[first:last]), shape)
            for first, last in row_blocks
        ]
        self.weight_scales = torch.from_numpy(self.eval.scales)
        self.eval_bounds = self.eval.eval_bounds()
        self.corpus_levels, self.zero_point = (
            WIDE if _exact_at(WIDE, row_blocks[0], width, queries.shape[1]) else NARROW
        )
        self.checked = False
        self.buffers = Buffers()

    def quantize_corpus(self, rows: np.ndarray, first_id: int = 0) -> tuple[Quantized, np.ndarray]:
        """Corpus rows (ids from first_id) as read from a shard, quantized, and the bounds screen_int8_tile
        reads for them."""
        quantized = quantize(rows, self.centre, self.corpus_levels, self.zero_point, first_id, self.buffers, unit=True)
        return quantized, quantized.corpus_bounds(self.centre)

    def __call__(self, corpus: Quantized) -> Iterator[tuple[int, int, int, np.ndarray]]:
        """(first eval row, last, first block row, tile) for each tile of a quantized corpus block."""
        import torch

        activations = torch.from_numpy(corpus.levels)
        for (first, last), packed in zip(self.row_blocks, self.packed, strict=True):
            for column in range(0, len(activations), self.width):
                stop = min(column + self.width, len(activations))
                tile = _product(activations[column:stop], self.zero_point, packed, self.weight_scales[first:last])
                if not self.checked:
                    self._check(tile[0], corpus.levels[column], first, last)
                yield first, last, column, tile

    def _check(self, products: np.ndarray, corpus_levels: np.ndarray, first: int, last: int) -> None:
        """One corpus row's products against integer arithmetic done here: an engine that saturates or
        re-quantizes would make the error bound false, so it stops the scan."""
        levels = corpus_levels.astype(np.int64) - self.zero_point
        expected = (self.eval.levels[first:last].astype(np.int64) @ levels) * self.eval.scales[first:last].astype(
            np.float64
        )
        if not np.allclose(products, expected, rtol=2.0**-20, atol=0):
            raise RuntimeError("oneDNN's int8 products are not the exact integer products here; use precision float32")
        self.checked = True


@dataclass
class _Idle:
    """Tiles between two scans, built from a private copy of the eval rows (tiles.eval.rows), and the caller's
    array they were last used with."""

    tiles: Int8Tiles
    user: weakref.ref | None = None


_idle: list[_Idle] = []  # at most one: the last scan's tiles, while its caller's eval array lives
_idle_lock = threading.RLock()


def _forget(user: weakref.ref) -> None:
    with _idle_lock:
        _idle[:] = [idle for idle in _idle if idle.user is not user]


@contextlib.contextmanager
def tiles_for(queries: np.ndarray, row_blocks: list[tuple[int, int]], width: int) -> Iterator[Int8Tiles]:
    """Int8Tiles for these eval rows, the previous scan's when it had the same rows and layout: a scan of
    many shards quantizes and packs the eval rows once and reuses its chunk buffers. Kept until the
    caller's array is collected; a scan in another thread meanwhile builds its own (tiles are not shared)."""
    with _idle_lock:
        idle = _idle.pop() if _idle else None
    if idle is None or not (
        (idle.tiles.row_blocks, idle.tiles.width) == (row_blocks, width)
        and np.array_equal(idle.tiles.eval.rows, queries)
    ):
        idle = _Idle(Int8Tiles(queries.copy(), row_blocks, width))
    idle.user = weakref.ref(queries, _forget)
    yield idle.tiles
    with _idle_lock:
        _idle[:] = [idle]
