"""The task YAMLs and their `!function` module are what the registry generates; a new spec gets every task family."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures import mmstar_rows, real_photos
from lmms_eval import utils as lmms_utils
from lmms_eval.tasks import TaskManager

from lmms_contam import cli
from lmms_contam.hosts.lmms_eval import task_files
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.hosts.lmms_eval.scanned import SCANNED_METRICS
from lmms_contam.registry.specs import SPECS
from lmms_contam.schema import write_parquet

TOY = "toybench"
FAMILIES = ("original", "perturbed", "contam", "circular", "option_shuffle", "text_only")


def test_the_checked_in_task_files_are_what_the_registry_generates(capsys):
    assert cli.main(["tasks", "generate", "--check"]) == 0, capsys.readouterr()
    assert "0 file(s) differ" in capsys.readouterr().out


def test_generate_rewrites_a_changed_file_and_removes_a_stray_one(tmp_path, capsys):
    tasks, functions = tmp_path / "tasks", tmp_path / "functions.py"
    shutil.copytree(tasks_dir(), tasks, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(task_files.FUNCTIONS_FILE, functions)
    edited = tasks / "mmstar" / "mmstar_contam.yaml"
    edited.write_text(edited.read_text().replace("higher_is_better: false", "higher_is_better: true"))
    (tasks / "old").mkdir()
    (tasks / "old" / "_template_yaml").write_text("task: gone\n")
    (tasks / "realworldqa" / "realworldqa_circular.yaml").unlink()
    expected = sorted(str(p) for p in (edited, tasks / "old" / "_template_yaml",
                                       tasks / "realworldqa" / "realworldqa_circular.yaml"))  # fmt: skip
    assert task_files.differences(tasks, functions) == expected
    assert task_files.write(tasks, functions) == expected
    assert task_files.differences(tasks, functions) == [] and not (tasks / "old").exists()
    shipped = {p.relative_to(tasks_dir()) for p in tasks_dir().rglob("*") if "__pycache__" not in p.parts}
    assert {p.relative_to(tasks) for p in tasks.rglob("*")} == shipped


@pytest.mark.parametrize("benchmark", [name for name, bound in BINDINGS.items() if bound.builtin_yaml])
def test_the_built_in_yaml_reads_as_lmms_eval_loads_it(benchmark):
    """Includes merged in lmms-eval's order and relative `!function`s made absolute: the same functions."""
    path = task_files.base_yaml(SPECS[benchmark])
    ours = task_files.read_task_yaml(path)
    theirs = lmms_utils.load_yaml_config(str(path), mode="full")
    assert set(ours) == set(theirs) - {"include"}
    for key, value in theirs.items():
        if key in ("dataset_kwargs", "include"):  # lmms-eval resolves local data files; built-ins have none
            continue
        assert _loaded(ours[key]) == _described(value), key


def _described(value: object) -> object:
    if isinstance(value, type):  # a class (AI2D's filter): its name, and the file its methods are written in
        return (value.__qualname__, {v.__code__.co_filename for v in vars(value).values() if hasattr(v, "__code__")})
    if callable(value):  # lmms-eval loads a built-in's utils.py by path: compare where the code is written
        return (value.__code__.co_filename, value.__qualname__)
    if isinstance(value, dict):
        return {k: _described(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_described(v) for v in value]
    return value


def _loaded(value: object) -> object:
    """Our reading with each dotted path imported, as lmms-eval's absolute fallback would."""
    if isinstance(value, task_files.Function):
        module, name = value.rsplit(".", 1)
        return _described(getattr(__import__(module, fromlist=[name]), name))
    if isinstance(value, dict):
        return {k: _loaded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_loaded(v) for v in value]
    return value


def test_a_task_yaml_the_generator_cannot_carry_is_refused(tmp_path, monkeypatch):
    own = tmp_path / "own.yaml"
    own.write_text("output_type: generate_until\nfewshot_config: {sampler: first_n}\n")
    monkeypatch.setitem(SPECS, TOY, replace(SPECS["synthetic"], name=TOY))
    monkeypatch.setitem(BINDINGS, TOY, replace(BINDINGS["synthetic"], own_task_yaml=str(own)))  # absolute
    with pytest.raises(task_files.TaskFileError, match=r"own.yaml: .* carry \['fewshot_config'\]"):
        task_files.generated()


@pytest.fixture
def toy_tasks(tmp_path, monkeypatch) -> Path:
    """A benchmark added to the registry and bound to lmms-eval in the test only (the only one, so its folder
    holds its tasks alone): MMStar's built-in task, layout and hub parser."""
    toy, bound = replace(SPECS["mmstar"], name=TOY, label="ToyBench", released=False), BINDINGS["mmstar"]
    for table in (SPECS, BINDINGS):
        for name in list(table):
            monkeypatch.delitem(table, name)
    monkeypatch.setitem(SPECS, TOY, toy)
    monkeypatch.setitem(BINDINGS, TOY, bound)
    rows = [{**row, "benchmark": TOY, "item_id": f"toy-{row['original_id']}"} for row in mmstar_rows(real_photos())]
    monkeypatch.setenv(f"LMMS_CONTAM_DATASET_{TOY.upper()}", str(write_parquet(rows, TOY, tmp_path / "toy.parquet")))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert task_files.write(tmp_path / "tasks", tmp_path / "toy_task_functions.py", "toy_task_functions")
    return tmp_path / "tasks"


def test_a_new_spec_gets_every_task_family_with_no_other_change(toy_tasks):
    configs = [lmms_utils.load_yaml_config(str(p), mode="simple") for p in toy_tasks.rglob("*.yaml")]
    assert {c["task"] for c in configs if "group" not in c} == {*(f"{TOY}_{f}" for f in FAMILIES), f"{TOY}_scanned"}
    assert [c["task"] for c in configs if "group" in c] == [[f"{TOY}_contam"]]  # contam_paired
    manager = TaskManager(include_path=str(toy_tasks))
    for family in FAMILIES:
        name = f"{TOY}_{family}"
        task = manager.load_task_or_group([name])[name]
        docs = task.test_docs()
        assert {doc["contam_benchmark"] for doc in docs} == {TOY}, name
        assert task.config.doc_to_visual(docs[0])[0].mode == "RGB"
        assert docs[0]["question"][:10] in task.doc_to_text(docs[0])
        outputs = [task.process_results(doc, [doc["contam_gold"]]) for doc in docs]  # a model right on everything
        assert all(out["contam_ids"]["correct"] == 1 and out["contam_ids"]["benchmark"] == TOY for out in outputs)
        metrics = set().union(*outputs) - {"contam_ids"}
        values = {m: task.aggregation()[m]([out[m] for out in outputs if m in out]) for m in metrics}
        first = {"original": "average", "perturbed": "average", "contam": "delta", "circular": "circular_drop",
                 "option_shuffle": "shuffle_delta", "text_only": "acc_text_only"}[family]  # fmt: skip
        assert values[first] == (0.0 if family in ("contam", "circular", "option_shuffle") else 1.0), name
    scanned = lmms_utils.load_yaml_config(str(toy_tasks / "scanned" / f"{TOY}_scanned.yaml"), mode="full")
    assert scanned["process_docs"].__name__ == f"{TOY}_scanned_docs"
    assert scanned["dataset_path"] == SPECS[TOY].source.hub_id == "Lin-Chen/MMStar"
    assert [m["metric"] for m in scanned["metric_list"]][-len(SCANNED_METRICS) :] == list(SCANNED_METRICS)
