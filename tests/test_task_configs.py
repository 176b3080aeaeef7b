"""Every YAML in tasks/ loads fully in lmms-eval, and reuses the built-in tasks' prompts unchanged."""

from pathlib import Path

import pytest
import yaml
from lmms_eval import utils as lmms_utils
from lmms_eval.tasks import TaskManager

from lmms_contam.harness.registration import tasks_dir

YAMLS = sorted(tasks_dir().rglob("*.yaml"))
TASK_YAMLS = [p for p in YAMLS if "task" in yaml.safe_load(p.read_text().replace("!function", "")) and "group" not in
              yaml.safe_load(p.read_text().replace("!function", ""))]  # fmt: skip
BUILTIN = Path(lmms_utils.__file__).parent / "tasks"
# Documents per item of each peer detector task (None: one per option, CircularEval's rotations).
DETECTOR_DOCS = {"circular": None, "option_shuffle": 2, "text_only": 1}
BUILTIN_YAML = {
    "mmstar": BUILTIN / "mmstar" / "mmstar.yaml",
    "realworldqa": BUILTIN / "realworldqa" / "realworldqa.yaml",
    "naturalbench": BUILTIN / "naturalbench" / "naturalbench.yaml",
}


def test_the_glob_finds_every_task():
    names = {yaml.safe_load(p.read_text().replace("!function", ""))["task"] for p in TASK_YAMLS}
    expected = {f"{b}_{v}" for b in (*BUILTIN_YAML, "synthetic") for v in ("perturbed", "original", "contam")}
    detectors = {f"{b}_{d}" for b in ("mmstar", "realworldqa", "synthetic") for d in DETECTOR_DOCS}
    assert names == expected | detectors


@pytest.fixture(scope="module")
def manager():
    return TaskManager(include_path=str(tasks_dir()))


@pytest.mark.parametrize("path", TASK_YAMLS, ids=lambda p: p.stem)
def test_task_loads_and_every_function_runs_on_a_document(path, manager, with_sets):
    name = lmms_utils.load_yaml_config(str(path), mode="simple")["task"]
    task = manager.load_task_or_group([name])[name]
    docs = task.test_docs()
    per_item = next((n for kind, n in DETECTOR_DOCS.items() if name.endswith(kind)), 2 if "_contam" in name else 1)
    assert len(docs) == 12 * (per_item or docs[0]["contam_n_options"])
    doc = docs[0]
    visuals = task.config.doc_to_visual(doc)
    assert visuals and visuals[0].mode == "RGB"
    prompt = task.doc_to_text(doc)
    assert isinstance(prompt, str) and doc.get("question", doc.get("Question", ""))[:10] in prompt
    output = task.process_results(doc, [doc["contam_gold"]])
    assert output["contam_ids"]["correct"] == 1
    assert set(output) - {"contam_ids"} <= set(task.aggregation())
    for metric in set(output) - {"contam_ids"}:
        assert isinstance(task.aggregation()[metric]([output[metric]]), float)


def test_group_lists_the_three_paired_tasks(manager, with_sets):
    loaded = manager.load_task_or_group(["contam_paired"])
    (group,) = loaded
    assert sorted(loaded[group]) == ["mmstar_contam", "naturalbench_contam", "realworldqa_contam"]


@pytest.mark.parametrize("benchmark", sorted(BUILTIN_YAML))
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
