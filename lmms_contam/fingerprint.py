"""What a cached result was computed from, as one digest: reuse it only when every input is the same.

Files are identified by resolved path, size, modification time and a hash of their bytes (the
whole file when it is small, else its head, tail and evenly spaced blocks: a corpus shard of
gigabytes is not read whole to decide whether it changed). Everything else is hashed as canonical
JSON, so two runs agree on a digest whatever the order of a dict's keys.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole
SAMPLE_BLOCKS = 16
BLOCK_BYTES = 64 << 10


def digest(value: Any) -> str:
    """SHA-256 of `value` as canonical JSON (sorted keys; paths and other objects by their str)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _content_sha256(path: Path, size: int) -> tuple[str, str]:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= FULL_HASH_BYTES:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
            return sha.hexdigest(), "full"
        for start in np.linspace(0, size - BLOCK_BYTES, SAMPLE_BLOCKS + 2).astype(np.int64).tolist():
            handle.seek(start)
            sha.update(handle.read(BLOCK_BYTES))
    return sha.hexdigest(), "sampled"


def file_identity(path: str | os.PathLike) -> dict:
    """A file's identity: where it is, its size and time, and a hash of its bytes (whole or sampled)."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    sha, hashed = _content_sha256(resolved, stat.st_size)
    return {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha, "hashed": hashed}


def tree_identity(path: str | os.PathLike) -> list[dict]:
    """Identities of a file, or of every file under a folder (relative names, in order)."""
    root = Path(path).resolve()
    if root.is_file():
        return [file_identity(root)]
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return [{**file_identity(p), "path": p.relative_to(root).as_posix()} for p in files]


def listing_identity(root: str | os.PathLike, files: list[Path]) -> list[dict]:
    """Name, size and modification time of each file: cheap enough for thousands of images."""
    base = Path(root).resolve()
    found = []
    for path in files:
        stat = path.stat()
        found.append(
            {"path": path.resolve().relative_to(base).as_posix(), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        )
    return found


def array_sha256(array: np.ndarray) -> str:
    """Dtype, shape and bytes of an array."""
    contiguous = np.ascontiguousarray(array)
    sha = hashlib.sha256(f"{contiguous.dtype.str}{contiguous.shape}".encode())
    sha.update(contiguous.reshape(-1).view(np.uint8).data)
    return sha.hexdigest()


def image_sha256(image) -> str:
    """A PIL image's mode, size and pixels (not its encoding: the same picture re-saved is the same)."""
    sha = hashlib.sha256(f"{image.mode}{image.size}".encode())
    sha.update(image.tobytes())
    return sha.hexdigest()


def local_or_hub(source: str, hub_fingerprint) -> dict:
    """A local path's file identities, or for a hub id what `hub_fingerprint()` says of the loaded data."""
    path = Path(source)
    if path.exists():
        return {"local": str(path.resolve()), "files": tree_identity(path)}
    return {"hub": source, "fingerprint": hub_fingerprint()}


def absolute(value: str | None) -> str | None:
    """A local path made absolute (so a record read from another folder still finds it); hub ids as given."""
    if value is None:
        return None
    path = Path(value)
    return str(path.resolve()) if path.exists() else value


@functools.cache
def package_code_digest() -> str:
    """SHA-256 of the package's Python sources: a cache of what its code computed (the tasks' documents) is
    reused only by the same code, so an upgrade or an edit never serves documents an older version shaped."""
    package = Path(__file__).resolve().parent
    sha = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        sha.update(source.relative_to(package).as_posix().encode() + b"\0" + source.read_bytes())
    return sha.hexdigest()
