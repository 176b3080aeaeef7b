"""A keyed store of stage results: one file per (stage, item), written atomically.

A rerun after a crash or Ctrl-C reads what finished and repeats nothing: a record exists only once
its write completed, and nothing else marks progress. Every record carries the digest of the inputs
it was computed from (fingerprint.digest of the item, the settings, the model and its server); a
record whose inputs differ from the caller's is not returned, so a changed input is computed again.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from lmms_contam.atomic import atomic_path
from lmms_contam.fingerprint import digest

SAFE = re.compile(r"[^A-Za-z0-9._-]")


class StageStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, stage: str, key: str, suffix: str = ".json") -> Path:
        name_digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return self.root / stage / f"{SAFE.sub('_', key)[:80]}-{name_digest}{suffix}"

    def get(self, stage: str, key: str, inputs: dict) -> dict | None:
        """The stored record of `key`, if it was computed from exactly these `inputs`."""
        path = self.path(stage, key)
        if not path.exists():
            return None
        record = json.loads(path.read_text())
        return record if record.get("inputs_sha256") == digest(inputs) else None

    def put(self, stage: str, key: str, inputs: dict, record: dict) -> dict:
        record = {**record, "inputs_sha256": digest(inputs)}
        with atomic_path(self.path(stage, key)) as tmp:
            tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        return record

    def get_bytes(self, stage: str, key: str, inputs: dict, suffix: str) -> Path | None:
        """The stored file of `key`, if its record says it was made from these `inputs`."""
        target = self.path(stage, key, suffix)
        return target if target.exists() and self.get(stage, key, inputs) is not None else None

    def put_bytes(self, stage: str, key: str, inputs: dict, data: bytes, suffix: str) -> Path:
        """The file, then its record: the record marks it done (removed first, so a crash in between
        leaves no record that vouches for another file)."""
        self.path(stage, key).unlink(missing_ok=True)
        target = self.path(stage, key, suffix)
        with atomic_path(target) as tmp:
            tmp.write_bytes(data)
        self.put(stage, key, inputs, {"file": target.name, "sha256": hashlib.sha256(data).hexdigest()})
        return target

    def cost(self, stage: str) -> dict:
        """Calls, tokens and dollars of every API answer stored for `stage`, this run's and earlier runs'."""
        folder = self.root / stage
        records = [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.exists() else []
        return {
            "calls": len(records),
            "input_tokens": sum(r["input_tokens"] for r in records),
            "output_tokens": sum(r["output_tokens"] for r in records),
            "usd": round(sum(r["cost_usd"] for r in records), 6),
        }
