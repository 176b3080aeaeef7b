"""`lmms-contam push`: a perturbed set to a hub dataset repository, through huggingface_hub's real client
against a loopback hub, in the layout `load_dataset(repo, split="test")` and the tasks read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import datasets
import pytest
from helpers.fixtures import mmstar_rows, real_photos
from helpers.loopback_hub import LoopbackHub

from lmms_contam.schema import write_parquet

TOKEN = "hf_loopbacksecret7f3a"


@pytest.fixture()
def perturbed_set(tmp_path):
    folder = tmp_path / "set"
    write_parquet(mmstar_rows(real_photos()), "mmstar", folder / "data.parquet")
    manifest = {"kind": "lmms-contam perturb", "benchmark": "mmstar", "schema_version": 1, "kept": 12}
    (folder / "data.manifest.json").write_text(json.dumps(manifest))
    return folder


def push(hub: LoopbackHub, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN)
    return subprocess.run([sys.executable, "-m", "lmms_contam.cli", "push", *args], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip


def test_push_commits_a_set_that_loads_by_split_and_records_the_commit(perturbed_set, tmp_path):
    with LoopbackHub() as hub:
        done = push(hub, str(perturbed_set), "contam-org/mmstar-perturbed", "--private")
        again = push(hub, str(perturbed_set), "contam-org/mmstar-perturbed")  # the repo exists: a second commit
    assert done.returncode == 0, done.stderr
    assert again.returncode == 0, again.stderr
    repo = hub.repos["contam-org/mmstar-perturbed"]
    assert repo["private"] and len(repo["commits"]) == 2
    assert set(repo["files"]) == {"data/test-00000-of-00001.parquet", "data.manifest.json", "README.md"}
    assert repo["files"]["data/test-00000-of-00001.parquet"] == (perturbed_set / "data.parquet").read_bytes()
    assert set(hub.authorizations) == {f"Bearer {TOKEN}"}
    assert TOKEN not in done.stdout + done.stderr + again.stdout + again.stderr
    local = json.loads((perturbed_set / "data.manifest.json").read_text())
    assert local["hub"]["repo_id"] == "contam-org/mmstar-perturbed" and local["hub"]["commit"] == repo["commits"][-1]
    assert f"commit {repo['commits'][-1]}" in again.stdout
    pushed_manifest = json.loads(repo["files"]["data.manifest.json"])
    assert "hub" not in pushed_manifest and pushed_manifest["kept"] == 12  # not the first push's record
    # The repository as a folder: the card's YAML gives split "test", and the rows are the set's rows.
    clone = tmp_path / "clone"
    for path, content in repo["files"].items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_bytes(content)
    loaded = datasets.load_dataset(str(clone), split="test")
    original = datasets.Dataset.from_parquet(str(perturbed_set / "data.parquet"))
    assert loaded.num_rows == original.num_rows == 12
    assert loaded["item_id"] == original["item_id"] and loaded["new_answer"] == original["new_answer"]
    assert "LMMS_CONTAM_DATASET_MMSTAR" in repo["files"]["README.md"].decode()


def test_refused_commit_and_bad_sets_fail_clearly_and_leave_the_set_as_it_was(perturbed_set, tmp_path):
    before = (perturbed_set / "data.manifest.json").read_text()
    with LoopbackHub(fail_commits_with=403) as hub:
        refused = push(hub, str(perturbed_set), "contam-org/mmstar-perturbed")
    assert refused.returncode == 1 and "contam-org/mmstar-perturbed failed" in refused.stderr
    assert "403" in refused.stderr and TOKEN not in refused.stderr
    assert (perturbed_set / "data.manifest.json").read_text() == before

    broken = tmp_path / "broken"
    shutil.copytree(perturbed_set, broken)
    table = datasets.Dataset.from_parquet(str(broken / "data.parquet")).remove_columns("new_answer")
    table.to_parquet(str(broken / "data.parquet"))
    with LoopbackHub() as hub:
        bad_set = push(hub, str(broken), "contam-org/broken")
        no_manifest = push(hub, str(tmp_path), "contam-org/empty")
        bad_id = push(hub, str(perturbed_set), "not a repo id")
    assert bad_set.returncode == 1 and "new_answer" in bad_set.stderr and str(broken / "data.parquet") in bad_set.stderr
    assert no_manifest.returncode == 1 and "data.parquet: not found" in no_manifest.stderr
    assert bad_id.returncode == 2 and "not a hub repository id" in bad_id.stderr
    assert hub.repos == {}, "nothing is created for a set that fails its checks"
