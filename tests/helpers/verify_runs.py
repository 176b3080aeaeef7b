"""`lmms-contam verify` against a loopback judge whose verdicts are scripted per item."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.fixtures import mmstar_rows, real_photos
from helpers.loopback import LoopbackServer, completion
from helpers.paths import CONFIGS
from lmms_contam.schema import write_parquet

# Item 9's reply names two options in one string, as a server that ignores response_format may: no verdict, as
# item 10's prose is not. Item 11: the image left unchanged.
REJECTED = {3: "wrong", 5: "wrong", 7: "wrong", 8: "ambiguous", 9: "two in one string", 10: "garbage"}
UNUSABLE = 2  # replies that are no verdict: counted as failed calls, asked again on every run
KEPT = sorted(set(range(12)) - set(REJECTED) - {11})


def scripted(delay: float = 0.0):
    rows = {int(r["original_id"]): r for r in mmstar_rows(real_photos())}

    def script(body, _number):
        text = body["messages"][0]["content"][1]["text"]
        item = int(re.search(r"object (\d+)-0", text)[1])
        new = rows[item]["new_answer"]
        plan = REJECTED.get(item)
        if plan == "garbage":
            return 200, completion("I cannot decide."), delay
        other = next(x for x in "ABCD" if x != new)
        letters = {"wrong": [other], "ambiguous": ["A", "B", "C"], "two in one string": [f"{new}, {other}"]}.get(
            plan, [new]
        )
        return 200, completion(json.dumps({"correct_options": letters, "reason": "scripted"})), delay

    return script


def imported_set(tmp_path: Path) -> Path:
    """The fixture's MMStar set as `import mm-perturb` leaves it: data.parquet and an unverified manifest."""
    rows = mmstar_rows(real_photos())
    rows[11]["image"] = rows[11]["original_image"]  # an edit that changed nothing
    folder = tmp_path / "mmstar"
    write_parquet(rows, "mmstar", folder / "data.parquet")
    manifest = {"kind": "lmms-contam import mm-perturb", "verification": {"verified": False, "kept": 12, "of": 12,
                "by": "none: the authors' release is unfiltered"}}  # fmt: skip
    (folder / "data.manifest.json").write_text(json.dumps(manifest))
    return folder


def recipe(tmp_path: Path, server: LoopbackServer, concurrency: int = 4) -> Path:
    endpoint = {"base_url": server.base_url, "api_key_env": "LMMS_CONTAM_TEST_KEY", "max_retries": 0,
                "concurrency": concurrency}  # fmt: skip
    variant = {
        "base": str(CONFIGS / "perturb" / "flux_canny.yaml"),
        "verify": {"judge": {"endpoint": endpoint}, "drift": {"min_change": 0.001, "min_resemblance": -1.0}},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(variant))
    return path


def verify(*args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "verify", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LMMS_CONTAM_TEST_KEY": "sk-test-verify-0123456789", **env})  # fmt: skip
