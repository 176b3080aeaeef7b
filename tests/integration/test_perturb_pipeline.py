"""`lmms-contam perturb` end to end: loopback VLM endpoints, a tiny Flux ControlNet, real photos."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import datasets
import pytest
from helpers.benchmark_fixtures import fixture_of
from helpers.fixtures import real_photos, write_hub_copy
from helpers.loopback_hub import LoopbackHub
from helpers.perturb_runs import SECRET, judged_by, perturb

from lmms_contam.items import Item
from lmms_contam.perturb.swap import swap_answer
from lmms_contam.perturb.verify import answer_letter


def test_pipeline_builds_a_set_the_tasks_load_and_a_rerun_repeats_nothing(originals, flux, tmp_path):
    parquet, expected = originals
    ambiguous = next(iter(expected))
    out = tmp_path / "out"
    with judged_by(expected, ambiguous, tmp_path, flux) as (server, config):
        first = perturb("mmstar", "--config", config, "--out", str(out), "--originals", str(parquet))
        calls = len(server.requests)
        second = perturb("mmstar", "--config", config, "--out", str(out), "--originals", str(parquet))
        with LoopbackHub() as hub:  # every stage stored: the third run only assembles, then pushes
            pushed = perturb("mmstar", "--config", config, "--out", str(out), "--originals", str(parquet),
                             "--push-to-hub", "contam-org/mmstar-perturbed", hub=hub)  # fmt: skip
        assert len(server.requests) == calls, "a rerun made API calls"
    assert first.returncode == 0, first.stderr
    assert "kept 11 of 12 items" in first.stdout and "verify: 1 judge: reject" in first.stdout
    assert calls == 24  # 12 captions + 12 judge calls
    assert SECRET not in first.stdout + first.stderr
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    manifest_text = (out / "data.manifest.json").read_text()
    assert SECRET not in manifest_text
    manifest = json.loads(manifest_text)
    assert manifest["cost"]["caption"]["calls"] == 12 and manifest["cost"]["caption"]["usd"] > 0
    assert manifest["config"]["generate"]["conditioning_scale"] == 0.8
    assert manifest["config"]["caption"]["temperature"] == 0.3
    models = manifest["editor"]["models"]  # hub ids resolved to the commits that were loaded
    assert {m["id"]: m["commit"] for m in models.values()} == flux["commits"]
    kept = datasets.load_dataset("parquet", data_files=str(out / "data.parquet"), split="train")
    assert second.returncode == 0 and "kept 11 of 12 items" in second.stdout
    for row in kept:
        assert row["new_answer"] == expected[row["question"]] != row["original_answer"]
        assert row["image"].size == tuple(max(16, round(s / 16) * 16) for s in row["original_image"].size)
    checked = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "datasets", "mmstar", "--check"],
                             capture_output=True, text=True, env={**os.environ,
                             "LMMS_CONTAM_DATASET_MMSTAR": str(out)})  # fmt: skip
    assert "11 valid rows" in checked.stdout, checked.stderr
    assert pushed.returncode == 0, pushed.stderr
    files = hub.repos["contam-org/mmstar-perturbed"]["files"]
    assert files["data/test-00000-of-00001.parquet"] == (out / "data.parquet").read_bytes()
    assert json.loads((out / "data.manifest.json").read_text())["hub"]["commit"] in pushed.stdout


@pytest.mark.parametrize("benchmark", ["seedbench", "mmbench", "scienceqa", "ai2d", "mme", "mmmu"])
def test_perturb_builds_a_valid_set_from_a_copy_in_the_hub_layout(benchmark, flux, tmp_path):
    """SEED-Bench: a list of images per row; MMBench: a hint joined to the question, a missing option "nan";
    MME: yes/no, two questions per image. (MMStar has the tests above. RealWorldQA's and NaturalBench's fixtures
    ask one question of several items, and the scripted judge tells items apart by their question.)"""
    rows = fixture_of(benchmark).set_rows(real_photos())
    parquet = write_hub_copy(benchmark, rows, "original", tmp_path / f"{benchmark}.parquet")
    items = [Item(benchmark, r["original_id"], r["question"], tuple(r["options"]), r["original_answer"], None)
             for r in rows]  # fmt: skip
    expected = {item.question: swap_answer(item) for item in items}
    letters = {item.question: answer_letter(item, expected[item.question]) for item in items}  # the judge's words
    out = tmp_path / "out"
    with judged_by(letters, rows[0]["question"], tmp_path, flux) as (_server, config):
        done = perturb(benchmark, "--config", config, "--out", str(out), "--originals", str(parquet))
    assert done.returncode == 0 and "kept 11 of 12 items" in done.stdout, done.stdout + done.stderr
    kept = datasets.load_dataset("parquet", data_files=str(out / "data.parquet"), split="train")
    by_question = {r["question"]: r for r in rows}
    for row in kept:
        assert row["new_answer"] == expected[row["question"]] != row["original_answer"]
        assert row["options"] == by_question[row["question"]]["options"]
    checked = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "datasets", benchmark, "--check"],
                             capture_output=True, text=True, env={**os.environ,
                             f"LMMS_CONTAM_DATASET_{benchmark.upper()}": str(out)})  # fmt: skip
    assert "11 valid rows" in checked.stdout, checked.stderr


def test_bad_config_fails_clearly(tmp_path):
    bad = tmp_path / "recipe.yaml"
    bad.write_text("caption:\n  endpoint: {model: x, api_key: sk-nope}\n  template: t.txt\n")
    done = perturb("mmstar", "--config", str(bad), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "invalid perturbation config" in done.stderr and "not in a config" in done.stderr


def test_shards_split_the_work_and_the_assembly_repeats_none_of_it(originals, flux, tmp_path):
    parquet, expected = originals
    out = tmp_path / "out"
    with judged_by(expected, "", tmp_path, flux) as (server, config):
        common = ("mmstar", "--config", config, "--out", str(out), "--originals", str(parquet))
        for shard in ("0/2", "1/2"):
            done = perturb(*common, "--shard", shard)
            assert done.returncode == 0 and f"shard {shard} done" in done.stdout, done.stderr
        assert not (out / "data.parquet").exists()
        sharded_calls = len(server.requests)
        assembled = perturb(*common)
        assert len(server.requests) == sharded_calls == 24
    assert "kept 12 of 12 items" in assembled.stdout, assembled.stderr
    assert perturb(*common, "--shard", "2/2").returncode == 2


def test_human_review_decisions_feed_back_into_the_set(originals, flux, tmp_path):
    parquet, expected = originals
    ambiguous = next(iter(expected))
    out = tmp_path / "out"
    with judged_by(expected, ambiguous, tmp_path, flux) as (server, config):
        common = ("mmstar", "--config", config, "--out", str(out), "--originals", str(parquet))
        assert perturb(*common).returncode == 0
        page = (out / "review.html").read_text()
        assert page.count('alt="perturbed"') == 12 and "judge: reject" in page
        review = json.loads((out / "review.json").read_text())
        rejected = next(key for key, entry in review.items() if entry["automatic"] == "judge: reject")
        kept = sorted(key for key, entry in review.items() if entry["automatic"] == "keep")
        review[rejected]["decision"] = "keep"  # a human overrules the judge
        review[kept[0]]["decision"] = "reject"  # and drops one it kept
        (out / "review.json").write_text(json.dumps(review))
        calls = len(server.requests)
        again = perturb(*common)
        assert len(server.requests) == calls
    assert "kept 11 of 12 items" in again.stdout and "verify: 1 human: reject" in again.stdout, again.stdout
    ids = set(datasets.load_dataset("parquet", data_files=str(out / "data.parquet"), split="train")["item_id"])
    assert rejected in ids and kept[0] not in ids
    assert json.loads((out / "review.json").read_text())[rejected]["decision"] == "keep"
    review[kept[1]]["decision"] = "maybe"
    (out / "review.json").write_text(json.dumps(review))
    bad = perturb(*common)
    assert bad.returncode == 2 and f"{kept[1]}: decision must be one of auto, keep, reject" in bad.stderr
