"""The synthetic benchmark and the controlled-contamination experiment (`lmms-contam demo`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.lab import train
from lmms_contam.lab.evaluate import complete, llava_args
from lmms_contam.synthetic import benchmark


def test_training_prompt_uses_the_tasks_post_prompt():
    task = yaml.safe_load((tasks_dir() / "synthetic" / "synthetic_original.yaml").read_text().replace("!function", ""))
    assert task["lmms_eval_specific_kwargs"]["default"]["post_prompt"] == train.POST_PROMPT


@pytest.mark.parametrize(("decay", "moved"), [(False, 1.0), (True, 0.5)])
def test_a_schedule_without_decay_keeps_its_peak_learning_rate(decay, moved):
    """Under a constant gradient each AdamW step moves a weight by the step's learning rate: 100 steps at 0.01
    move it by 1.0 without decay, by half that under cosine decay to zero."""
    weight = torch.nn.Parameter(torch.zeros(3))
    schedule = train.Schedule(lr=0.01, warmup=0, weight_decay=0.0, decay=decay)
    train.optimise([], [weight], lambda: weight.sum(), 100, schedule)
    assert torch.allclose(-weight.detach(), torch.full((3,), moved), atol=0.01)


def test_image_only_rates_find_the_test_items_only_where_they_were_trained_on(tmp_path):
    from lmms_contam.lab.experiment import rate_check
    from lmms_contam.lab.experiment_models import TrainingRecipe
    from lmms_contam.lab.image_only_rates import image_only_rates

    recipe = TrainingRecipe(test_items=12, clean_steps=4, clean_batch=16)
    test_set = benchmark.build_test_set(recipe.test_items, tmp_path / "synthetic.parquet")
    rates = image_only_rates(recipe, 0, test_set, tmp_path / "scan")
    assert {data: r["image_only_rate"] for data, r in rates.items()} == {"clean": 0.0, "contaminated": 1.0,
                                                                         "control": 0.0}  # fmt: skip
    assert (rates["clean"]["corpus_rows"], rates["contaminated"]["corpus_rows"]) == (64, 12)
    assert rates["clean"]["threshold"] == 0.999 and rate_check(rates).passed
    leaked = {**rates, "clean": {**rates["clean"], "image_only_rate": 1 / 12}}
    assert not rate_check(leaked).passed


@pytest.mark.parametrize("strategy", ["full", "lora"])
def test_each_degree_is_its_own_fine_tuning_run(tmp_path, strategy):
    """A degree's model is the same whichever other degrees were planned: a complete run annealed over its
    own epochs, not a snapshot caught mid-way through the highest degree's run."""
    from safetensors.torch import load_file

    from lmms_contam.lab.experiment_models import TrainingRecipe, build_models, plan

    recipe = TrainingRecipe(test_items=12, clean_steps=4, clean_batch=16, degrees=(1, 2), finetune_batch=4)
    together = build_models(plan(recipe, 0, (strategy,), control=False), recipe, tmp_path / "together")
    alone = build_models(plan(recipe, 0, (strategy,), control=False, degrees=(1,)), recipe, tmp_path / "alone")

    def weights(folder: Path) -> dict:
        return {
            name: tensor for path in sorted(folder.glob("*.safetensors")) for name, tensor in load_file(path).items()
        }

    low, high, low_alone = (weights(f) for f in (together[f"{strategy}-e1"], together[f"{strategy}-e2"],
                                                  alone[f"{strategy}-e1"]))  # fmt: skip
    assert low.keys() == low_alone.keys() == high.keys()
    assert all(torch.equal(low[name], low_alone[name]) for name in low)
    assert any(not torch.equal(low[name], high[name]) for name in low)


def test_a_demo_through_a_harness_that_is_not_installed_stops_before_any_training(tmp_path, monkeypatch):
    """The served host's package is looked for first: a missing one is named with its install, nothing is made."""
    import dataclasses

    from lmms_contam.lab import experiment

    missing = dataclasses.replace(experiment.SERVED_HOSTS["inspect-ai"], package="lmms_contam_no_such_harness")
    monkeypatch.setitem(experiment.SERVED_HOSTS, "inspect-ai", missing)
    with pytest.raises(ValueError, match=r"inspect-ai is not installed here .*lmms-contam\[inspect\]"):
        experiment.run_experiment(dataclasses.replace(experiment.DEMO, host="inspect-ai"), tmp_path / "demo")
    assert not (tmp_path / "demo").exists()


def test_a_run_is_reused_only_for_the_model_folder_it_loaded(tmp_path):
    """lmms-eval names a run by the folder it loaded: after `--out` moves, the runs of the old folders are redone
    (the experiment would find none of its models among them), as is a run missing a task's samples."""
    run, model = tmp_path / "eval" / "clean", tmp_path / "models" / "clean"
    (run / "model").mkdir(parents=True)
    (run / "model" / "20261207_samples_synthetic_contam.jsonl").write_text("{}\n")
    config = {"model": "llava_hf", "model_args": llava_args(model)}
    (run / "model" / "20261207_results.json").write_text(json.dumps({"config": config}))
    assert complete(run, ("synthetic_contam",), model)
    assert not complete(run, ("synthetic_contam",), tmp_path / "moved" / "models" / "clean")
    assert not complete(run, ("synthetic_contam", "synthetic_circular"), model)
