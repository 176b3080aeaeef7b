"""Every YAML in tasks/ loads fully in lmms-eval, and reuses the built-in tasks' prompts unchanged."""

import argparse
import inspect
from pathlib import Path

import pytest
import yaml
from helpers.harness import BUILTIN_TASKS, MASKED_OPTION_BENCHMARKS
from lmms_eval import utils as lmms_utils
from lmms_eval.tasks import TaskManager

from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.hosts.lmms_eval.scanned import SCANNED_METRICS
from lmms_contam.registry.specs import SPECS, perturb_from_hub, perturbable, scannable, with_detectors

YAMLS = sorted(tasks_dir().rglob("*.yaml"))
SCANNED_YAMLS = sorted((tasks_dir() / "scanned").glob("*.yaml"))  # hub datasets: tests/test_scanned.py runs them


def _plain(path: Path) -> dict:
    return yaml.safe_load(path.read_text().replace("!function", ""))


TASK_YAMLS = [p for p in YAMLS if p not in SCANNED_YAMLS and "task" in _plain(p) and "group" not in _plain(p)]
# Documents per item of each peer detector task (None: one per option, CircularEval's rotations).
DETECTOR_DOCS = {"circular": None, "option_shuffle": 2, "text_only": 1, "masked_option": 1}
# The built-in task each benchmark's tasks reuse the prompt, generation and scoring of.
BUILTIN_YAML = {name: BUILTIN_TASKS / b.builtin_yaml for name, b in BINDINGS.items() if b.builtin_yaml}


def test_the_glob_finds_every_task():
    names = {_plain(p)["task"] for p in TASK_YAMLS}
    expected = {f"{b}_{v}" for b in perturbable() for v in ("perturbed", "original", "contam")}
    detectors = {f"{b}_{d}" for b in with_detectors() for d in DETECTOR_DOCS if d != "masked_option"}
    detectors |= {f"{b}_masked_option" for b in MASKED_OPTION_BENCHMARKS}
    assert names == expected | detectors
    scanned = {_plain(p)["task"] for p in SCANNED_YAMLS}
    assert scanned == {f"{b}_scanned" for b in scannable()}


@pytest.fixture(scope="module")
def manager():
    return TaskManager(include_path=str(tasks_dir()))


@pytest.mark.parametrize("path", TASK_YAMLS, ids=lambda p: p.stem)
def test_task_loads_and_every_function_runs_on_a_document(path, manager, with_sets, tmp_path):
    name = lmms_utils.load_yaml_config(str(path), mode="simple")["task"]
    task = manager.load_task_or_group([name])[name]
    docs = task.test_docs()
    per_item = next((n for kind, n in DETECTOR_DOCS.items() if name.endswith(kind)), 2 if "_contam" in name else 1)
    excluded = 1 if name == "mmstar_circular" else 0  # the fixture's item whose options name option letters
    assert len(docs) == (12 - excluded) * (per_item or docs[0]["contam_n_options"]) + excluded
    doc = docs[0]
    visuals = task.config.doc_to_visual(doc)
    assert visuals and visuals[0].mode == "RGB"
    question = doc["question"] if "question" in doc else doc["Question"]  # every benchmark has one of the two
    prompt = task.doc_to_text(doc)
    assert isinstance(prompt, str) and question and question[:10] in prompt
    # Every aggregation over the whole set, for a model right on every document: known values.
    values = _aggregated(task, docs, "contam_gold", tmp_path)
    if "n_excluded" in values:
        assert values.pop("n_excluded") == excluded, name
    if "delta_ci_low" in values:  # no pair disagrees: an interval around 0, open (12 pairs do not prove 0)
        low, high = values.pop("delta_ci_low"), values.pop("delta_ci_high")
        assert low == pytest.approx(-high) and high > 0.05, name
    expected = _when_always_right(values, docs[0]["contam_n_options"], SPECS[doc["contam_benchmark"]])
    assert values == pytest.approx(expected, nan_ok=True), name
    if name.endswith("_contam"):  # and for a memoriser: right on every original, wrong on every counterfactual
        memorised = _aggregated(task, docs, "contam_original_answer", tmp_path)
        assert (memorised["acc_original"], memorised["acc_perturbed"], memorised["delta"]) == (1.0, 0.0, -1.0)
        assert memorised["n_flagged"] == memorised["n_pairs"] == 12 and memorised["delta_ci_high"] < 0
        assert memorised["mcnemar_p"] == pytest.approx(2 * 0.5**12)  # exact McNemar, 12 discordant pairs


def _aggregated(task, docs: list[dict], answer_field: str, out: Path) -> dict[str, float]:
    outputs = [task.process_results(doc, [doc[answer_field]]) for doc in docs]
    assert all(out["contam_ids"]["correct"] == (doc[answer_field] == doc["contam_gold"])
               for doc, out in zip(docs, outputs, strict=True))  # fmt: skip
    # lmms-eval aggregates the keys the task declares and ignores the others (MMMU's built-in returns two more);
    # every key the plugin adds is declared.
    metrics = (set().union(*outputs) - {"contam_ids"}) & set(task.aggregation())
    assert metrics and {"mmmu_acc_pass_at_k", "submission"} >= set().union(*outputs) - metrics - {"contam_ids"}
    values = {m: _aggregate(task.aggregation()[m], [o[m] for o in outputs if m in o], out) for m in metrics}
    return {m: float(value) for m, value in values.items() if value is not None}  # None: a file was written


def _aggregate(aggregation, values: list, out: Path):
    """As lmms-eval's evaluator calls it: with its CLI arguments where the function takes them (MMBench's)."""
    if "args" in inspect.signature(aggregation).parameters:
        return aggregation(values, argparse.Namespace(output_path=str(out)))
    return aggregation(values)


# What each aggregation gives when every answer is right (12 items); any other metric is one of the built-in
# tasks' accuracies (MMStar's categories and average, RealWorldQA's exact match, NaturalBench's four), so 1.
# MMBench reports percent; MME sums acc + acc+ (200 when all right) over categories, one of each kind here.
ALWAYS_RIGHT = {"gpt_eval_score": 100.0, "mme_perception_score": 200.0, "mme_cognition_score": 200.0,
                "delta": 0.0, "mcnemar_p": 1.0, "n_flagged": 0.0, "n_pairs": 12.0, "circular_drop": 0.0,
                "circular_p": 1.0, "n_inconsistent": 0.0, "n_items": 12.0,
                "shuffle_delta": 0.0, "shuffle_p": 1.0, "n_flipped": 0.0, "n_right": 12.0, "n_named": 12.0}  # fmt: skip


def _when_always_right(values: dict[str, float], n_options: int, spec) -> dict[str, float]:
    """Text-only's chance is 1 / options; masked option's is the benchmark's rate by construction, NaN (and so
    its excess and p) where it states none."""
    chance = spec.masked_option_chance if "acc_masked" in values else 1 / n_options
    chance = float("nan") if chance is None else chance
    expected = {}
    for metric in values:
        if metric == "chance":
            expected[metric] = chance
        elif metric in ("text_only_excess", "masked_excess"):
            expected[metric] = 1 - chance
        elif metric in ("text_only_p", "masked_p"):
            expected[metric] = chance**12  # binomial: 12 of 12 right by chance
        else:
            expected[metric] = ALWAYS_RIGHT.get(metric, 1.0)
    return expected


TEXT_ONLY_YAMLS = [p for p in TASK_YAMLS if p.stem.endswith("_text_only")]


@pytest.mark.parametrize("path", TEXT_ONLY_YAMLS, ids=lambda p: p.stem)
def test_text_only_tasks_can_send_no_image(path, manager, with_sets, monkeypatch):
    """With no image, nothing of the task reads one: its doc_to_visual gives none, and it has no message builder
    of its own (MMMU's built-in doc_to_messages reads the image), so chat loaders use text and visuals."""
    monkeypatch.setenv("LMMS_CONTAM_TEXT_ONLY_IMAGE", "none")
    name = _plain(path)["task"]
    task = manager.load_task_or_group([name])[name]
    doc = task.test_docs()[0]
    assert doc["contam_text_only_input"] == "none" and task.config.doc_to_visual(doc) == []
    assert task.config.doc_to_messages is None
    assert isinstance(task.doc_to_text(doc), str)


def test_group_lists_every_paired_task_built_from_the_hub(manager, with_sets):
    loaded = manager.load_task_or_group(["contam_paired"])
    (group,) = loaded
    assert sorted(loaded[group]) == sorted(f"{b}_contam" for b in perturb_from_hub())


@pytest.mark.parametrize("benchmark", sorted(set(BUILTIN_YAML) & set(perturbable())))
def test_prompt_generation_and_model_blocks_are_the_builtin_ones(benchmark):
    builtin = lmms_utils.load_yaml_config(str(BUILTIN_YAML[benchmark]), mode="full")
    ours = lmms_utils.load_yaml_config(str(tasks_dir() / benchmark / f"{benchmark}_perturbed.yaml"), mode="full")
    for key in ("output_type", "generation_kwargs", "lmms_eval_specific_kwargs"):
        assert ours.get(key) == builtin.get(key), f"{key} drifted from lmms-eval's {benchmark}"
    for key in ("doc_to_visual", "doc_to_text"):
        # The built-in YAML loads its utils.py by file path, so compare the code, not the function object.
        assert (ours[key].__code__.co_filename, ours[key].__qualname__) == (
            builtin[key].__code__.co_filename,
            builtin[key].__qualname__,
        )


def _same_function(a, b) -> bool:
    return (a.__code__.co_filename, a.__qualname__) == (b.__code__.co_filename, b.__qualname__)


@pytest.mark.parametrize("benchmark", scannable())
def test_scanned_task_is_the_builtin_task_plus_contamination_metrics(benchmark):
    builtin = lmms_utils.load_yaml_config(str(BUILTIN_YAML[benchmark]), mode="full")
    ours = lmms_utils.load_yaml_config(str(tasks_dir() / "scanned" / f"{benchmark}_scanned.yaml"), mode="full")
    for key in ("dataset_path", "dataset_name", "test_split", "output_type", "generation_kwargs",
                "lmms_eval_specific_kwargs", "model_specific_generation_kwargs"):  # fmt: skip
        assert ours.get(key) == builtin.get(key), f"{key} drifted from lmms-eval's {benchmark}"
    for key in ("doc_to_visual", "doc_to_text"):
        assert _same_function(ours[key], builtin[key]), key
    hub = SPECS[benchmark].source
    assert (hub.hub_id, hub.config, hub.split) == (ours["dataset_path"], ours.get("dataset_name"), ours["test_split"])
    theirs = {m["metric"]: m["aggregation"] for m in builtin["metric_list"]}
    mine = {m["metric"]: m["aggregation"] for m in ours["metric_list"]}
    assert list(mine) == [*theirs, *SCANNED_METRICS]
    if SPECS[benchmark].group_scheme is None:  # else the built-in asserts every row or pair; ours group by id
        for name, aggregation in theirs.items():
            if isinstance(aggregation, str):
                assert mine[name] == aggregation, name
            else:
                assert _same_function(mine[name], aggregation), name
