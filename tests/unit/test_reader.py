"""Shards read straight from the disk: the same rows as np.load, in every layout the scan takes, and the
same scan results; the next shard's first chunk read ahead; a file that refuses O_DIRECT read anyway."""

from __future__ import annotations

import errno
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from lmms_contam.corpus import reader as shard_reader
from lmms_contam.corpus.reader import FIRST_ROWS, ShardRows, reader, shard_rows
from lmms_contam.corpus.scan import scan_matrix, scan_shards
from lmms_contam.lab.speed import evict


def saved(path: Path, rows: np.ndarray, version: tuple[int, int] | None = None) -> Path:
    if version is None:
        np.save(path, rows)
    else:  # a version-2 header: another length, so the rows start at another offset
        with open(path, "wb") as handle:
            np.lib.format.write_array(handle, rows, version=version)
    return path


def read_back(shard: ShardRows, chunk: int) -> np.ndarray:
    pieces = [(start, rows.copy()) for start, rows in reader().chunks(shard, chunk)]
    expected_starts = [0, *range(min(FIRST_ROWS, chunk), len(shard), chunk)] if len(shard) else []
    assert [start for start, _ in pieces] == expected_starts
    return np.concatenate([rows for _, rows in pieces]) if pieces else np.empty((0, shard.shape[1]), shard.dtype)


@pytest.mark.parametrize("cached", [True, False], ids=["in the page cache", "read from the disk"])
@pytest.mark.parametrize(
    "dtype, n_rows, dim, chunk, version",
    [
        (np.float16, 5000, 768, 1024, None),  # several chunks, the last one short
        (np.float32, 3001, 37, 500, (2, 0)),  # rows of 148 bytes: no chunk starts on a 4 KiB boundary
        (np.float64, 7, 3, 4096, None),  # one chunk, smaller than a block
        (">f4", 2100, 16, 64, None),  # big-endian
        (np.float32, 0, 8, 100, None),  # an empty shard
    ],
)
def test_rows_read_straight_from_the_disk_are_np_loads(tmp_path, dtype, n_rows, dim, chunk, version, cached):
    rng = np.random.default_rng(n_rows)
    rows = rng.normal(size=(n_rows, dim)).astype(dtype)
    path = saved(tmp_path / "shard.npy", rows, version)
    if not cached:
        evict([path])
    shard = shard_rows(path)
    # np.load read the header through the cache: a shard within the header's page is cached even when evicted.
    past_the_header = shard.data_offset + rows.nbytes > shard_reader.BLOCK
    assert shard_reader._cached(shard, 0, len(shard)) == (n_rows > 0 and (cached or not past_the_header))
    assert isinstance(shard, ShardRows) and shard.shape == rows.shape and shard.dtype == rows.dtype
    np.testing.assert_array_equal(read_back(shard, chunk), rows)


def test_layouts_that_are_not_plain_rows_are_left_to_the_memory_map(tmp_path):
    for name, array in {
        "fortran": np.asfortranarray(np.ones((50, 4), np.float32)),
        "flat": np.ones(50, np.float32),
        "integers": np.ones((50, 4), np.int32),
    }.items():
        shard = shard_rows(saved(tmp_path / f"{name}.npy", array))
        assert isinstance(shard, np.memmap), name
    queries = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match="dimension mismatch"):
        scan_matrix(queries, shard_rows(saved(tmp_path / "flat.npy", np.ones(50, np.float32))), 0)


def test_a_shard_cut_short_after_it_was_opened_is_refused_by_its_last_row(tmp_path):
    path = saved(tmp_path / "shard.npy", np.ones((1000, 64), np.float32))
    evict([path])
    shard = shard_rows(path)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 300)
    with pytest.raises(ValueError, match="the file ends 300 bytes short of row 999"):
        read_back(shard, 256)


CUT_WHILE_SCANNED = """
import os, sys, threading, time
import numpy as np
from lmms_contam.corpus.reader import shard_rows
from lmms_contam.corpus.scan import scan_matrix
path = sys.argv[1]
float(np.load(path).sum())  # every page in the page cache
shard = shard_rows(path)
queries = np.eye(2, 64, dtype=np.float32)
threading.Thread(target=lambda: (time.sleep(0.2), os.truncate(path, os.path.getsize(path) // 2))).start()
deadline = time.monotonic() + 20
try:
    while time.monotonic() < deadline:
        scan_matrix(queries, shard, 0, chunk=1024)
except ValueError as exc:
    print(exc)
    sys.exit(2)
"""


def test_a_cached_shard_cut_short_while_it_is_scanned_is_refused_not_a_crash(tmp_path):
    """Defect 11: cached chunks were scanned where they lay in the memory map, and a shard truncated meanwhile
    killed the scan with SIGBUS (exit 135, no message). Every chunk is read into a buffer: a short read."""
    rows = np.random.default_rng(3).normal(size=(200_000, 64)).astype(np.float32)
    path = saved(tmp_path / "img_emb_0.npy", rows / np.linalg.norm(rows, axis=1, keepdims=True))
    done = subprocess.run([sys.executable, "-c", CUT_WHILE_SCANNED, str(path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2 and "the file ends" in done.stdout and "bytes short of row" in done.stdout, done


def test_a_file_system_that_refuses_o_direct_is_read_through_the_cache(tmp_path, monkeypatch):
    rows = np.random.default_rng(1).normal(size=(900, 20)).astype(np.float32)
    path = saved(tmp_path / "shard.npy", rows)
    evict([path])
    plain = shard_reader._read_fully
    tried = []

    def refusing(path, view, offset, wanted, flags):
        tried.append(flags)
        if flags:
            raise OSError(errno.EINVAL, "Invalid argument")  # what open(2) says where O_DIRECT is unsupported
        return plain(path, view, offset, wanted, flags)

    monkeypatch.setattr(shard_reader, "_read_fully", refusing)
    np.testing.assert_array_equal(read_back(shard_rows(path), 300), rows)
    assert tried[0] == shard_reader.DIRECT != 0 and 0 in tried


def test_shards_scanned_through_the_reader_with_the_next_read_ahead_give_the_array_results(tmp_path):
    rng = np.random.default_rng(2)
    queries, corpus = rng.normal(size=(30, 48)), rng.normal(size=(9000, 48))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    corpus = (corpus / np.linalg.norm(corpus, axis=1, keepdims=True)).astype(np.float16)
    corpus[4321] = queries[5]  # a copy
    paths = [saved(tmp_path / f"img_emb_{i}.npy", part) for i, part in enumerate(np.array_split(corpus, 3))]
    evict(paths[1:])  # one shard where the page cache holds it, two read from the disk
    listed = [(p.stem, p, offset) for p, offset in zip(paths, (0, 3000, 6000), strict=True)]
    expected = scan_matrix(queries, corpus, 0, k=7, precision="int8")
    found = scan_shards(queries, listed, tmp_path / "work", k=7, chunk=1000, precision="int8")
    assert (found.ids == expected.ids).all() and (found.sims == expected.sims).all()
    assert found.ids[5, 0] == 4321
    # Read ahead: after the second of three shards, the third's first chunk is the one waiting.
    list(reader().chunks(shard_rows(paths[1], next_path=paths[2]), 1000))
    assert reader().ahead is not None and reader().ahead[0] == str(paths[2])
    # A next shard that cannot be opened does not fail this one: its own scan reports it.
    missing = shard_rows(paths[1], next_path=tmp_path / "gone.npy")
    np.testing.assert_array_equal(read_back(missing, 1000), corpus[3000:6000])
    assert reader().ahead is None
    list(reader().chunks(shard_rows(paths[1], next_path=paths[2]), 1000))
    # A shard other than the announced one is read from its start, not from the waiting chunk.
    np.testing.assert_array_equal(read_back(shard_rows(paths[0]), 1000), corpus[:3000])
    assert reader().ahead is None
    # Scans in several threads at once: each thread has its own reader and buffers.
    results, readers = [], []

    def scan_in_a_thread(index: int) -> None:
        readers.append(reader())
        results.append(scan_shards(queries, listed, tmp_path / f"thread{index}", k=7, chunk=700, precision="float32"))

    threads = [threading.Thread(target=scan_in_a_thread, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(each) for each in readers}) == 3 and len(results) == 3
    for result in results:
        assert (result.ids == expected.ids).all()
        np.testing.assert_allclose(result.sims, expected.sims, atol=1e-6)
