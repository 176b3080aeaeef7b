"""Write-then-rename, so a crash never leaves a partial output that looks complete; several outputs
of one command appear together or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it becomes `path` only if the block succeeds."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def atomic_paths(paths: Iterable[str | os.PathLike]) -> Iterator[list[Path]]:
    """Temporary paths beside each of `paths`; they become their targets only if the block succeeds.

    Every temporary file is created before the block runs, so an output that cannot be written (its
    folder is a file, a target is a folder, no permission) fails before any output is touched.
    """
    finals = [Path(path) for path in paths]
    for final in finals:
        if final.is_dir():
            raise IsADirectoryError(f"{final}: is a folder")
    temps: list[str] = []
    try:
        for final in finals:
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
            os.close(fd)
            temps.append(tmp)
        yield [Path(tmp) for tmp in temps]
        umask = os.umask(0)
        os.umask(umask)
        for tmp, final in zip(temps, finals, strict=True):
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, final)
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
