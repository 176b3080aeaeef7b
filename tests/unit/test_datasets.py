"""Where tasks find their perturbed set: env var, then config, then the default folder."""

import shutil

import datasets
import pytest

from lmms_contam import set_locations as resolution
from lmms_contam.set_locations import PerturbedSetNotFound, resolve


def test_missing_set_lists_every_place_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_CONFIG", str(tmp_path / "config.yaml"))
    with pytest.raises(PerturbedSetNotFound) as info:
        resolve("mmstar")
    message = str(info.value)
    assert "$LMMS_CONTAM_DATASET_MMSTAR: not set" in message
    assert f"config {tmp_path / 'config.yaml'}: no such file" in message
    assert "datasets/mmstar: does not exist" in message
    assert "lmms-contam" in message


def test_environment_variable_wins_over_config_and_default(fixture_sets, tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(f"datasets:\n  mmstar: {fixture_sets['realworldqa']}\n")
    monkeypatch.setenv("LMMS_CONTAM_CONFIG", str(config))
    assert resolve("mmstar").value == str(fixture_sets["realworldqa"])
    assert resolve("mmstar").found_via.startswith("config")
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
    assert resolve("mmstar").value == str(fixture_sets["mmstar"])
    assert resolve("mmstar").found_via == "$LMMS_CONTAM_DATASET_MMSTAR"


def test_config_paths_are_relative_to_the_config_file(fixture_sets, tmp_path, monkeypatch):
    shutil.copy(fixture_sets["mmstar"], tmp_path / "mine.parquet")
    (tmp_path / "config.yaml").write_text("datasets:\n  mmstar: mine.parquet\n")
    monkeypatch.setenv("LMMS_CONTAM_CONFIG", str(tmp_path / "config.yaml"))
    location = resolve("mmstar")
    assert (location.kind, location.value) == ("parquet", str(tmp_path / "mine.parquet"))


def test_default_folder_holds_a_save_to_disk_set(fixture_sets, tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_HOME", str(tmp_path))
    rows = datasets.load_dataset("parquet", data_files=str(fixture_sets["naturalbench"]), split="train")
    rows.save_to_disk(str(tmp_path / "datasets" / "naturalbench"))
    location = resolve("naturalbench")
    assert location.kind == "disk"
    assert len(resolution.load_perturbed_set("naturalbench")) == 12


def test_hub_id_is_accepted_and_bad_paths_are_not(monkeypatch, tmp_path):
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", "someone/mmstar-perturbed")
    assert resolve("mmstar").kind == "hub"
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(tmp_path / "nowhere" / "set.parquet"))
    with pytest.raises(resolution.PerturbedSetError, match="does not exist"):
        resolve("mmstar")
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(tmp_path / "notes.txt"))
    with pytest.raises(resolution.PerturbedSetError, match="not a .parquet file"):
        resolve("mmstar")


def test_cli_datasets_check(with_sets, capsys):
    from lmms_contam.cli import main

    assert main(["datasets", "--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("mmstar: parquet") and line.endswith("12 valid rows") for line in lines)
