"""Corpus shards read chunk by chunk straight from the disk into two reused buffers, the next chunk read on a
thread while this one is scanned.

A memory-mapped shard goes through the page cache: a cold scan spends CPU filling it (fresh pages for every
read), which two busy cores cannot hide, and at corpus scale (terabytes) the cache only churns. With O_DIRECT
the disk writes into buffers the scan already holds, and the reads cost the cores little. A chunk the page
cache holds already (a shard just written or scanned through the cache) is copied from it. No chunk is scanned
where it lies in a memory map: a shard cut short meanwhile would end the process with SIGBUS; a read returns
short instead, and the shard is refused by name. Where the runner says which shard comes next in this process,
that shard's first chunk is read while this one's last chunk is scanned. A file system that refuses O_DIRECT
is read through the cache.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DIRECT = getattr(os, "O_DIRECT", 0)  # Linux's; elsewhere reads go through the cache
BLOCK = 4096  # O_DIRECT aligns offsets, lengths and buffer addresses to this (a page; disks' blocks divide it)
FIRST_ROWS = 2048  # a shard's first chunk: nothing is scanned until it arrives, so it is small
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None  # for mincore(2)


@dataclass(frozen=True)
class ShardRows:
    """A 2-D float .npy shard, read by a ShardReader (scan.scan_matrix takes it in place of an array)."""

    path: str
    mapped: np.memmap = field(repr=False)  # its rows memory-mapped: their layout, and chunks already cached
    next_path: str | None = None  # the shard this process scans next, if known: its first chunk is read ahead

    ndim = 2

    @property
    def shape(self) -> tuple[int, int]:
        return self.mapped.shape

    @property
    def dtype(self) -> np.dtype:
        return self.mapped.dtype

    @property
    def data_offset(self) -> int:
        """Where the rows start in the file."""
        return int(self.mapped.offset)

    def __len__(self) -> int:
        return self.shape[0]


def shard_rows(path: str | Path, next_path: str | Path | None = None) -> ShardRows | np.ndarray:
    """The shard as ShardRows, or memory-mapped where its layout is not plain rows (Fortran order, not 2-D,
    not floats: the scan refuses those with its own message). np.load validates the header and the size."""
    mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    if not (
        isinstance(mapped, np.memmap) and mapped.ndim == 2 and mapped.flags.c_contiguous and mapped.dtype.kind == "f"
    ):
        return mapped
    return ShardRows(str(path), mapped, str(next_path) if next_path else None)


class ShardReader:
    """Reads ShardRows into two page-aligned buffers in turn: one holds the chunk being scanned while the other
    is filled. One reader per thread (reader()), so concurrent scans never share a buffer; it keeps its buffers
    (2 x the chunk's bytes: 96 MiB for 32,768 float16 rows of 768) for the thread's next scan, since fresh
    memory costs a page fault per 4 KiB on first touch."""

    def __init__(self) -> None:
        self.buffers: list[mmap.mmap] = []
        self.turn = 0
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="shard-reader")
        self.ahead: tuple[str, Future] | None = None  # the next shard's first chunk, being read

    def chunks(self, shard: ShardRows, chunk: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) for the whole shard: FIRST_ROWS, then `chunk` rows at a time. The rows are valid
        until the next item is asked for."""
        starts = [0, *range(min(FIRST_ROWS, chunk), len(shard), chunk)] if len(shard) else []
        stops = [*starts[1:], len(shard)]
        ahead, self.ahead = self.ahead, None
        pending = ahead[1] if ahead and ahead[0] == shard.path else self._read(shard, 0, stops[0]) if starts else None
        for index, start in enumerate(starts):
            rows = pending.result()
            if index + 1 < len(starts):
                pending = self._read(shard, starts[index + 1], stops[index + 1])
            elif shard.next_path:
                self._read_ahead(shard.next_path, chunk)
            yield start, rows

    def _read_ahead(self, path: str, chunk: int) -> None:
        """Start reading the next shard's first chunk. A next shard that cannot be opened is left alone: its
        own scan reports it, and this one's must not fail for it."""
        try:
            following = shard_rows(path)
        except (OSError, ValueError, EOFError):
            return
        if isinstance(following, ShardRows) and len(following):
            self.ahead = (following.path, self._read(following, 0, min(FIRST_ROWS, chunk, len(following))))

    def _read(self, shard: ShardRows, start: int, stop: int) -> Future:
        """Rows [start, stop) read into the next buffer on the reader's thread: copied from the page cache where
        it holds them already, else straight from the disk. Never used where they lie in a memory map: a shard
        cut short while it is scanned would kill the process (SIGBUS) instead of being refused by name."""
        buffer = self._buffer((stop - start) * shard.shape[1] * shard.dtype.itemsize + 2 * BLOCK)
        flags = 0 if _cached(shard, start, stop) else DIRECT
        return self.pool.submit(_read_rows, shard, start, stop, buffer, flags)

    def _buffer(self, size: int) -> mmap.mmap:
        """The buffer after the last one handed out, grown to `size` (anonymous maps are page-aligned)."""
        if len(self.buffers) < 2:
            self.buffers.append(_anonymous(size))
        self.turn = (self.turn + 1) % len(self.buffers)
        if len(self.buffers[self.turn]) < size:
            self.buffers[self.turn] = _anonymous(size)
        return self.buffers[self.turn]


def _anonymous(size: int) -> mmap.mmap:
    """Page-aligned memory, in huge pages where the kernel grants them: a direct read then pins a few dozen
    pages rather than thousands."""
    memory = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        with contextlib.suppress(OSError):
            memory.madvise(mmap.MADV_HUGEPAGE)
    return memory


def _cached(shard: ShardRows, start: int, stop: int) -> bool:
    """Whether the page cache holds every page of rows [start, stop): mincore(2) on the shard's memory map, which
    asks and reads nothing. Where it cannot be asked, the rows are read from the disk."""
    if _LIBC is None or stop <= start:
        return False
    row_bytes = shard.shape[1] * shard.dtype.itemsize
    first = shard.mapped.ctypes.data + start * row_bytes
    end = shard.mapped.ctypes.data + stop * row_bytes
    base = first - first % mmap.PAGESIZE
    resident = np.zeros(-(-(end - base) // mmap.PAGESIZE), np.uint8)
    if _LIBC.mincore(ctypes.c_void_p(base), ctypes.c_size_t(end - base), resident.ctypes.data_as(ctypes.c_void_p)):
        return False
    return bool((resident & 1).all())


def _read_rows(shard: ShardRows, start: int, stop: int, buffer: mmap.mmap, flags: int = DIRECT) -> np.ndarray:
    """Rows [start, stop) read into `buffer` at BLOCK-aligned offsets, as an array over it; a file that ends
    before them (cut short after it was opened) is refused naming the row."""
    row_bytes = shard.shape[1] * shard.dtype.itemsize
    first, end = shard.data_offset + start * row_bytes, shard.data_offset + stop * row_bytes
    aligned = first - first % BLOCK
    length = -(-(end - aligned) // BLOCK) * BLOCK
    view = memoryview(buffer)[:length]
    try:
        got = _read_fully(shard.path, view, aligned, end - aligned, flags)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
        got = _read_fully(shard.path, view, aligned, end - aligned, 0)  # no O_DIRECT here: through the cache
    if got < end - aligned:
        raise ValueError(f"the file ends {end - aligned - got} bytes short of row {stop - 1}")
    return np.frombuffer(buffer, shard.dtype, (stop - start) * shard.shape[1], first - aligned).reshape(
        stop - start, shard.shape[1]
    )


def _read_fully(path: str, view: memoryview, offset: int, wanted: int, flags: int) -> int:
    """Bytes read into `view` from `offset` until `wanted` or the end of the file."""
    handle = os.open(path, os.O_RDONLY | flags)
    try:
        got = 0
        while got < wanted:
            count = os.preadv(handle, [view[got:]], offset + got)
            if count == 0:
                break
            got += count
        return got
    finally:
        os.close(handle)


_local = threading.local()


def reader() -> ShardReader:
    """This thread's ShardReader."""
    if not hasattr(_local, "reader"):
        _local.reader = ShardReader()
    return _local.reader
