"""Write-then-rename, so a crash never leaves a partial output that looks complete; several outputs
of one command appear together or not at all.

A temporary file is named after its target, host and process. SIGKILL gives a writer no chance to
remove its temporary file, so the next write of the same target removes those of writers on this
host that no longer run.
"""

from __future__ import annotations

import glob
import os
import socket
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

HOST = socket.gethostname()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _remove_orphans(final: Path) -> None:
    """Temporary files of `final` left by writers on this host that were killed."""
    prefix = f".{final.name}.{HOST}-"
    for leftover in final.parent.glob(f".{glob.escape(final.name)}.*.tmp"):
        pid = leftover.name[len(prefix) :].split(".", 1)[0]
        if leftover.name.startswith(prefix) and pid.isdigit() and not _running(int(pid)):
            leftover.unlink(missing_ok=True)


def _temporary_beside(final: Path) -> str:
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(final)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.{HOST}-{os.getpid()}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    return tmp


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
        if os.path.lexists(final) and not (final.is_file() and not final.is_symlink()):
            # Renaming over a link, a device or a pipe would replace it (as root, /dev/null itself), not write to it.
            raise FileExistsError(f"{final}: is not a regular file (a link, device or pipe); name a file")
    temps: list[str] = []
    try:
        for final in finals:
            temps.append(_temporary_beside(final))
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


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it becomes `path` only if the block succeeds."""
    with atomic_paths([path]) as (tmp,):
        yield tmp
