"""Which files are inspect-ai's logs, by name alone (inspect's own rule): the command line asks every host whether a
path is its output before anything heavy is imported."""

from __future__ import annotations

import re
from pathlib import Path

# inspect names a .json log by its creation time first; every .eval file is a log.
JSON_LOG = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}[:-]\d{2}[:-]\d{2}.*\.json$")
BESIDE = (".checkpoints", ".shards", ".buffer")  # folders inspect keeps beside a log while it runs


def is_log_file(path: Path) -> bool:
    return path.suffix == ".eval" or bool(JSON_LOG.match(path.name))


def log_files(paths: list[Path]) -> list[Path]:
    """Every log under `paths` (a file named alone is read as given), sorted."""
    found = set()
    for path in paths:
        if path.is_file():
            found.add(path)
            continue
        found |= {p for p in path.rglob("*") if p.is_file() and is_log_file(p) and not _in_working_folder(p)}
    return sorted(found)


def _in_working_folder(path: Path) -> bool:
    return any(part.endswith(BESIDE) for part in path.parent.parts)
