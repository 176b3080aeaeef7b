"""`lmms-contam perturb` runs: loopback caption and judge endpoints, a tiny Flux ControlNet in the hub cache."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import datasets
import yaml

from helpers.fixtures import mmstar_rows, real_photos, write_hub_copy
from helpers.loopback import LoopbackServer, completion
from helpers.loopback_hub import LoopbackHub
from helpers.paths import PACKAGE_CONFIGS
from helpers.tiny_flux import build_tiny_flux_controlnet, install_in_hub_cache
from lmms_contam.items import Item
from lmms_contam.perturb.swap import swap_answer
from lmms_contam.registry.benchmarks.mmstar import mmstar_options

SECRET = "sk-loopback-secret-7f3a"


def mmstar_originals(root: Path) -> tuple[Path, dict[str, str]]:
    """A local MMStar copy in the hub layout, and the new answer the swap draws for each question."""
    rows = mmstar_rows(real_photos())
    parquet = write_hub_copy("mmstar", rows, "original", root / "mmstar.parquet")
    expected = {}
    for row in rows:
        item = Item("mmstar", row["original_id"], row["question"], tuple(mmstar_options(row["question"])),
                    row["original_answer"], None)  # fmt: skip
        expected[row["question"]] = swap_answer(item, seed=0)
    return parquet, expected


def tiny_flux_in_hub(folder: Path) -> dict:
    """A tiny Flux ControlNet as hub ids in the offline hub cache:
    {"base": id, "controlnet": id, "commits": {id: commit}}."""
    base, controlnet = build_tiny_flux_controlnet(folder)
    ids = {"base": "contam-test/tiny-flux", "controlnet": "contam-test/tiny-flux-controlnet-canny"}
    commits = {ids["base"]: install_in_hub_cache(base, ids["base"]),
               ids["controlnet"]: install_in_hub_cache(controlnet, ids["controlnet"])}  # fmt: skip
    return {**ids, "commits": commits}


def judge_script(expected: dict[str, str], ambiguous: str):
    def script(body, n):
        content = body["messages"][0]["content"]
        text = content[1]["text"]
        if "Reply with the prompt only" in text:  # the caption template: a reply that depends on the item only
            return 200, completion(f"a new scene {hashlib.sha256(text.encode()).hexdigest()[:8]}"), 0
        question = next(q for q in expected if q in text)
        letters = ["A", "B"] if question == ambiguous else [expected[question]]
        return 200, completion(json.dumps({"correct_options": letters, "reason": "test"})), 0

    return script


def write_config(folder, server, flux) -> str:
    """The paper's recipe with the loopback endpoints and the tiny Flux: a variant naming it as its base."""
    endpoint = {"base_url": server.base_url, "api_key_env": "LMMS_CONTAM_TEST_KEY", "max_retries": 0}
    variant = {
        "base": str(PACKAGE_CONFIGS / "perturb" / "flux_canny.yaml"),
        "caption": {"endpoint": dict(endpoint)},  # two dicts: one shared would be dumped as a YAML alias
        "generate": {"base_model": flux["base"], "controlnet": flux["controlnet"], "steps": 2, "device": "cpu",
                     "max_sequence_length": 32},
        "verify": {"judge": {"endpoint": dict(endpoint)},
                   "drift": {"min_change": 0.0, "min_resemblance": -1.0}},  # tiny Flux paints noise
    }  # fmt: skip
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(variant))
    return str(path)


@contextmanager
def judged_by(expected: dict[str, str], ambiguous: str, folder: Path, flux) -> Iterator[tuple[LoopbackServer, str]]:
    """The loopback caption and judge endpoint, and a recipe pointing at it."""
    with LoopbackServer(judge_script(expected, ambiguous)) as server:
        yield server, write_config(folder, server, flux)


def perturb(*args: str, hub: LoopbackHub | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LMMS_CONTAM_TEST_KEY": SECRET}
    if hub:  # online, but only to the loopback hub
        env = {key: value for key, value in env.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN="hf_loopback")
    return subprocess.run([sys.executable, "-m", "lmms_contam.cli", "perturb", *args], capture_output=True,
                          text=True, timeout=600, env=env)  # fmt: skip


def dataset_rows(path) -> list[tuple]:
    data = datasets.load_dataset("parquet", data_files=str(path), split="train").cast_column(
        "image", datasets.Image(decode=False)
    )
    return sorted((r["item_id"], r["new_answer"], r["image"]["bytes"]) for r in data)
