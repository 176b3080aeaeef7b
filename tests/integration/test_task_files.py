"""The task YAMLs and their `!function` module are what the registry generates; a new spec gets every task family."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.fixtures import mmstar_rows, real_photos
from lmms_eval import utils as lmms_utils
from lmms_eval.tasks import TaskManager

from lmms_contam import cli
from lmms_contam.detectors.base import Detector
from lmms_contam.detectors.registry import DETECTORS, signal_of
from lmms_contam.detectors.signals import order_signal, versions_by_item
from lmms_contam.hosts.lmms_eval import task_files
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.hosts.lmms_eval.scanned import SCANNED_METRICS
from lmms_contam.records import ContamRecord
from lmms_contam.registry.specs import SPECS
from lmms_contam.schema import write_parquet

TOY = "toybench"
FAMILIES = ("original", "perturbed", "contam", "circular", "option_shuffle", "text_only", "masked_option")


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


def test_a_text_answer_task_is_generated_only_where_the_binding_says_the_post_prompt_asks_for_the_letter(
    tmp_path, monkeypatch
):
    """A detector asking for an option's text replaces the post-prompt: a binding declaring the letter request there
    on a YAML with no post-prompt is refused, naming the file; a binding not declaring it gets no such task."""
    base = Path(task_files.__file__).parents[2] / BINDINGS["synthetic"].own_task_yaml
    own = tmp_path / "own.yaml"
    own.write_text(base.read_text().replace("post_prompt:", "no_post_prompt:"))
    monkeypatch.setitem(SPECS, TOY, replace(SPECS["synthetic"], name=TOY))
    monkeypatch.setitem(BINDINGS, TOY, replace(BINDINGS["synthetic"], own_task_yaml=str(own)))
    with pytest.raises(task_files.TaskFileError, match=r"own.yaml: no default post_prompt"):
        task_files.generated()
    monkeypatch.setitem(BINDINGS, TOY, replace(BINDINGS[TOY], letter_request_in_post_prompt=False))
    files, _ = task_files.generated()
    toy = {Path(path).stem for path in files if path.startswith(f"{TOY}/")}
    assert toy == {f"{TOY}_{family}" for family in FAMILIES if family != "masked_option"}


def _toy_benchmark(tmp_path: Path, monkeypatch) -> None:
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


def _generated_tasks(tmp_path: Path, module: str = "toy_task_functions") -> Path:
    """The tasks and their functions module, under a name no other test imports (Python keeps the first)."""
    assert task_files.write(tmp_path / "tasks", tmp_path / f"{module}.py", module)
    return tmp_path / "tasks"


@pytest.fixture
def toy_tasks(tmp_path, monkeypatch) -> Path:
    _toy_benchmark(tmp_path, monkeypatch)
    return _generated_tasks(tmp_path)


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
                 "option_shuffle": "shuffle_delta", "text_only": "acc_text_only",
                 "masked_option": "acc_masked"}[family]  # fmt: skip
        assert values[first] == (0.0 if family in ("contam", "circular", "option_shuffle") else 1.0), name
    scanned = lmms_utils.load_yaml_config(str(toy_tasks / "scanned" / f"{TOY}_scanned.yaml"), mode="full")
    assert scanned["process_docs"].__name__ == f"{TOY}_scanned_docs"
    assert scanned["dataset_path"] == SPECS[TOY].source.hub_id == "Lin-Chen/MMStar"
    assert [m["metric"] for m in scanned["metric_list"]][-len(SCANNED_METRICS) :] == list(SCANNED_METRICS)


def _reversal_signal(records):
    items = versions_by_item(records, lambda versions: set(versions) == {"forward", "reversed"})
    return order_signal(
        "reversal",
        items,
        reference=lambda versions: versions["forward"],
        changed=lambda versions: versions["reversed"].correct,
    )


REVERSAL = Detector(
    name="reversal",
    label="option reversal",
    description="accuracy with the options in reverse order, minus accuracy in the original order",
    about="The kept {label} items with their options in reverse order.",
    metrics=(("acc_forward", True), ("acc_reversed", True), ("reversal_delta", True), ("reversal_p", False)),
    orders=lambda item: {"forward": None, "reversed": tuple(reversed(range(len(item.options))))},
    owns=lambda variant: variant in ("forward", "reversed"),
    signal=_reversal_signal,
)


def test_a_new_detector_gets_its_task_family_with_no_other_change(tmp_path, monkeypatch):
    """A detector registered in the test only: its task is generated, lmms-eval loads it, its documents are the
    item in both orders, and its metrics are its signal, under the names it gives them."""
    _toy_benchmark(tmp_path, monkeypatch)
    monkeypatch.setitem(DETECTORS, REVERSAL.name, REVERSAL)
    tasks = _generated_tasks(tmp_path, module="toy_detector_task_functions")
    config = lmms_utils.load_yaml_config(str(tasks / TOY / f"{TOY}_reversal.yaml"), mode="simple")
    assert [m["metric"] for m in config["metric_list"]] == [name for name, _ in REVERSAL.metrics]
    assert "reverse order" in (tasks / TOY / f"{TOY}_reversal.yaml").read_text()
    name = f"{TOY}_reversal"
    task = TaskManager(include_path=str(tasks)).load_task_or_group([name])[name]
    docs = task.test_docs()
    by_item = {}
    for doc in docs:
        by_item.setdefault(doc["contam_item_id"], {})[doc["contam_variant"]] = doc
    assert len(docs) == 2 * len(by_item) and all(set(v) == {"forward", "reversed"} for v in by_item.values())
    for versions in by_item.values():
        forward, backward = versions["forward"], versions["reversed"]
        n = forward["contam_n_options"]
        letters = "ABCDEFGH"[:n]
        assert backward["contam_gold"] == letters[n - 1 - letters.index(forward["contam_gold"])]
        assert task.doc_to_text(forward) != task.doc_to_text(backward)
    outputs = [task.process_results(doc, ["A"]) for doc in docs]  # a model that always answers A
    values = {m: task.aggregation()[m]([out[m] for out in outputs]) for m in task.aggregation()}
    records = [ContamRecord.from_logged(out["contam_ids"], "test") for out in outputs]
    assert [r.correct for r in records] == [int(doc["contam_gold"] == "A") for doc in docs]
    signal = signal_of(records)
    assert signal.detector == "reversal" and signal.n_items == len(by_item) and signal.signal != 0
    reported = (values["acc_forward"], values["acc_reversed"], values["reversal_delta"], values["reversal_p"])
    assert reported == pytest.approx((signal.reference, signal.score, signal.signal, signal.p_value))
