"""A keyed store of stage results: one file per (stage, item), written atomically.

A rerun after a crash or Ctrl-C reads what finished and repeats nothing: a record exists only once
its write completed, and nothing else marks progress.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from lmms_contam.atomic import atomic_path

SAFE = re.compile(r"[^A-Za-z0-9._-]")


class StageStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, stage: str, key: str, suffix: str = ".json") -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return self.root / stage / f"{SAFE.sub('_', key)[:80]}-{digest}{suffix}"

    def get(self, stage: str, key: str) -> dict | None:
        path = self.path(stage, key)
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, stage: str, key: str, record: dict) -> dict:
        with atomic_path(self.path(stage, key)) as tmp:
            tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        return record

    def put_bytes(self, stage: str, key: str, data: bytes, suffix: str) -> Path:
        target = self.path(stage, key, suffix)
        with atomic_path(target) as tmp:
            tmp.write_bytes(data)
        return target

    def keys_done(self, stage: str) -> int:
        folder = self.root / stage
        return sum(1 for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else 0
