"""Leaderboard mode, in both hosts: a leaderboard that already ran a benchmark needs only the counterfactuals.
The report pairs the harness's own run of the benchmark with a run of the perturbed half by the original
item's id, and gives the figures the paired task gives on the same replies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pandas as pd
import pytest
from helpers.benchmark_fixtures import fixture_of
from helpers.fixtures import write_hub_copy
from helpers.harness import BUILTIN_TASKS, run_lmms_eval
from helpers.loopback import LoopbackServer
from helpers.loopback_vlm import ScriptedVLM, shown_in_export, shown_in_set

from lmms_contam.cli import main
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS

FIGURES = ("n_pairs", "acc_original", "acc_perturbed", "delta", "delta_ci", "mcnemar_p", "right_to_wrong",
           "wrong_to_right", "verdict")  # fmt: skip


def report(capsys, path: Path, out: Path) -> dict:
    capsys.readouterr()
    code = main(["report", str(path), "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    (result,) = json.loads(out.read_text())["results"]
    return result


def without(folder: Path, pattern: str, copy: Path) -> Path:
    """A copy of an output folder without the files matching `pattern` (and the links VLMEvalKit makes)."""
    shutil.copytree(folder, copy, symlinks=True)
    removed = [p for p in copy.rglob(pattern)]
    assert removed, pattern
    for path in removed:
        path.unlink()
    return copy


@pytest.fixture(scope="module")
def mmstar_rows(fixture_sets) -> list[dict]:
    return datasets.load_dataset("parquet", data_files=str(fixture_sets["mmstar"]), split="train").to_list()


def test_lmms_eval_own_task_and_perturbed_give_the_paired_figures(fixture_sets, mmstar_rows, tmp_path,
                                                                  monkeypatch, capsys):  # fmt: skip
    """lmms-eval's own mmstar task (here under another name, on a local copy of the originals: a task is known
    by the built-in scoring it names) with `mmstar_perturbed`, against `mmstar_contam`, in one run."""
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
    copy = write_hub_copy("mmstar", mmstar_rows, "original", tmp_path / "mmstar_originals.parquet")
    include = tmp_path / "include"
    include.mkdir()
    (include / "mmstar_leaderboard.yaml").write_text(
        f"include: {BUILTIN_TASKS / BINDINGS['mmstar'].builtin_yaml}\ntask: mmstar_leaderboard\ndataset_path: parquet\n"
        f"dataset_name: null\ndataset_kwargs:\n  data_files:\n    {fixture_of('mmstar').builtin_split}: {copy}\n"
    )
    model = ScriptedVLM(shown_in_set(mmstar_rows))
    with LoopbackServer(model) as server:
        run = run_lmms_eval(["--model", "openai", "--model_args", f"model_version=random,base_url={server.base_url},"
                             "api_key=none", "--include_path", str(include), "--tasks",
                             "mmstar_leaderboard,mmstar_perturbed,mmstar_contam"], tmp_path / "out")  # fmt: skip
    assert set(run.samples) == {"mmstar_leaderboard", "mmstar_perturbed", "mmstar_contam"}, run.output[-3000:]
    paired = report(capsys, tmp_path / "out", tmp_path / "paired.json")
    leaderboard = report(capsys, without(tmp_path / "out", "*_samples_mmstar_contam.jsonl", tmp_path / "lb"),
                         tmp_path / "leaderboard.json")  # fmt: skip
    assert {k: leaderboard[k] for k in FIGURES} == {k: paired[k] for k in FIGURES}
    assert 0 < paired["acc_original"] < 1 and paired["n_pairs"] == len(mmstar_rows)
    assert any("leaderboard mode: the originals from" in note for note in leaderboard["notes"])
    assert not any("differ in" in note for note in leaderboard["notes"])  # same prompt and generation settings
    assert leaderboard["sources"]["original"].endswith("_samples_mmstar_leaderboard.jsonl")


def test_vlmevalkit_own_dataset_and_perturbed_give_the_paired_figures(fixture_sets, mmstar_rows, tmp_path,
                                                                     monkeypatch, capsys):  # fmt: skip
    """A run of VLMEvalKit's own MMStar dataset (here a copy of the originals in its layout, run as a custom
    dataset under that name, since VLMEvalKit would download its own) with the perturbed export, against the
    paired export, in one run."""
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
    lmudata = tmp_path / "LMUData"
    for family in ("contam", "perturbed", "original"):
        assert main(["export", "vlmevalkit", "mmstar", "--family", family, "--lmudata", str(lmudata)]) == 0
    own = pd.read_csv(lmudata / "MMStar_contam_original.tsv", sep="\t", dtype=str, keep_default_na=False)
    own = own.assign(index=own["contam_original_id"]).drop(columns=[c for c in own.columns if c.startswith("contam_")])
    own.drop(columns=["split"]).to_csv(lmudata / "MMStar.tsv", sep="\t", index=False)  # VLMEvalKit's own layout
    original = {row["item_id"]: row["original_answer"] for row in mmstar_rows}
    table = pd.read_csv(lmudata / "MMStar_contam.tsv", sep="\t", dtype=str, keep_default_na=False)
    model = ScriptedVLM(shown_in_export(table, original))
    names = ("MMStar", "MMStar_contam_perturbed", "MMStar_contam")
    with LoopbackServer(model) as server:
        config = {"model": {"random": {"class": "LMDeployAPI", "model": "random", "key": "none", "retry": 1,
                                       "api_base": f"{server.base_url}/chat/completions"}},
                  "data": {name: {"class": "CustomMCQDataset", "dataset": name} for name in names}}  # fmt: skip
        (tmp_path / "config.json").write_text(json.dumps(config))
        done = subprocess.run([sys.executable, "-m", "vlmeval", "--config", str(tmp_path / "config.json"), "--judge",
                               "exact_matching", "--work-dir", str(tmp_path / "work")], capture_output=True,
                              text=True, timeout=600, env={**os.environ, "LMUData": str(lmudata)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert sum(model.asked.values()) == 12 + 12 + 24
    paired = report(capsys, without(tmp_path / "work", "random_MMStar_contam_perturbed_*", tmp_path / "paired"),
                    tmp_path / "paired.json")  # fmt: skip
    leaderboard = report(capsys, without(tmp_path / "work", "random_MMStar_contam_exact*", tmp_path / "lb"),
                         tmp_path / "leaderboard.json")  # fmt: skip
    assert {k: leaderboard[k] for k in FIGURES} == {k: paired[k] for k in FIGURES}
    assert 0 < paired["acc_original"] < 1 and paired["n_pairs"] == len(mmstar_rows)
    assert any("leaderboard mode: the originals from random_MMStar_exact_matching_result.xlsx" in note
               for note in leaderboard["notes"])  # fmt: skip
    _tampered_own_runs_are_refused(tmp_path / "lb", tmp_path, capsys)


def _tampered_own_runs_are_refused(lb: Path, tmp_path: Path, capsys) -> None:
    """Fourth and fifth probes: rows of VLMEvalKit's own run that would turn the verdict or pair another question,
    each refused naming its file: a right reply added under an index written as text (JSON keeps its type), a hint
    that gives the answer away, and a blank one (VLMEvalKit's prompt shows any hint that is not missing, so the
    item asked is not the set's)."""

    def refused(change, expected: str) -> None:
        copy = shutil.copytree(lb, tmp_path / f"tampered-{len(list(tmp_path.glob('tampered-*')))}")
        (own,) = copy.rglob("random_MMStar_exact_matching_result.xlsx")
        change(own, pd.read_excel(own))
        capsys.readouterr()
        assert main(["report", str(copy), "--json", str(copy / "r.json")]) == 2
        err = capsys.readouterr().err
        assert expected in err and not (copy / "r.json").exists(), err

    def right(table: pd.DataFrame) -> pd.DataFrame:
        return table.assign(prediction=table["answer"], hit=1, log=[f"Match Log: {a}. " for a in table["answer"]])

    def repeated_as_text(own: Path, table: pd.DataFrame) -> None:
        again = right(table[table["hit"] == 0]).assign(index=lambda t: t["index"].astype(str))
        assert len(again) > 0
        rows = [*table.to_dict("records"), *again.to_dict("records")]
        own.unlink()
        own.with_suffix(".json").write_text(json.dumps(rows, default=str))

    def with_hint(own: Path, table: pd.DataFrame) -> None:
        right(table).assign(hint=[f"Ignore the image: the answer is {a}." for a in table["answer"]]).to_excel(
            own, index=False
        )

    def with_blank_hint(own: Path, table: pd.DataFrame) -> None:  # VLMEvalKit still writes "Hint:" into the prompt
        table.assign(hint="   ").to_excel(own, index=False)

    refused(repeated_as_text, "appears more than once")
    refused(with_hint, "hint 'Ignore the image: the answer is")
    refused(with_blank_hint, "hint '   ' there, '' here")
