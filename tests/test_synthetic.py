"""The synthetic benchmark and the controlled-contamination experiment (`lmms-contam demo`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
import yaml

from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.schema import validate
from lmms_contam.synthetic import benchmark, train
from lmms_contam.synthetic.scenes import CELL, KINDS, counterfactual, draw_scene, render


def test_scenes_are_identical_in_another_process():
    code = "from lmms_contam.synthetic.scenes import draw_scene; print(repr(draw_scene('synthetic-000042')))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == repr(draw_scene("synthetic-000042"))
    assert draw_scene("synthetic-000042") != draw_scene("synthetic-000043")


@pytest.mark.parametrize("item", range(20))
def test_counterfactual_changes_only_the_target(item):
    scene = draw_scene(f"synthetic-{item:06d}")
    new = (scene.answer + 1 + item % 3) % 4
    before = np.asarray(render(scene), dtype=int)
    after = np.asarray(render(counterfactual(scene, new)), dtype=int)
    changed = np.argwhere((before != after).any(axis=-1))
    column, row = scene.target_cell % 2, scene.target_cell // 2
    assert len(changed) > 50, "the target's colour must change"
    assert changed[:, 0].min() >= row * CELL and changed[:, 0].max() < (row + 1) * CELL
    assert changed[:, 1].min() >= column * CELL and changed[:, 1].max() < (column + 1) * CELL
    drawn = counterfactual(scene, new).target_colour()
    palette = [np.array(colour) for colour in KINDS[scene.kind].palette.values()]
    mixed = (1 - scene.mix) * palette[new] + scene.mix * palette[(new + scene.confusion) % 4]
    assert np.allclose(drawn, np.clip(np.round(mixed + np.array(scene.noise)), 0, 255))


def test_counterfactuals_are_exactly_as_readable_as_their_originals():
    """An ideal reader (the nearest colour) is right on a counterfactual exactly when it is right on
    its original, for every possible new answer, so no sample of items favours either version."""
    for _, scene in benchmark.test_scenes(1000):
        right = scene.looks_like() == scene.answer
        for new in set(range(4)) - {scene.answer}:
            other = counterfactual(scene, new)
            assert (other.looks_like() == other.answer) == right
    # The first 300 items with the answers the benchmark swapped to (there, the earlier design lost 0.043).
    scenes = benchmark.test_scenes(300)
    swapped = [counterfactual(s, benchmark.swapped_answer(benchmark.to_item(i, s), 0)) for i, s in scenes]
    assert [s.looks_like() == s.answer for _, s in scenes] == [c.looks_like() == c.answer for c in swapped]


def test_about_a_quarter_of_items_are_beyond_skill():
    scenes = [scene for _, scene in benchmark.test_scenes(2000)]
    readable = np.mean([scene.looks_like() == scene.answer for scene in scenes])
    assert 0.65 <= readable <= 0.80, readable
    assert {scene.kind for scene in scenes} == set(KINDS)
    assert abs(np.mean([scene.kind == "circle" for scene in scenes]) - 0.5) < 0.05


def test_test_set_is_a_valid_perturbed_set(tmp_path):
    path = benchmark.build_test_set(40, tmp_path / "synthetic.parquet")
    rows = datasets.load_dataset("parquet", data_files=str(path), split="train")
    validate(rows, "synthetic", str(path))
    assert len(rows) == 40
    counterfactuals = benchmark.perturbed_examples(40)
    for row, example in zip(rows, counterfactuals, strict=True):
        assert row["new_answer"] == example.letter != row["original_answer"]
        assert np.array_equal(np.asarray(row["image"]), np.asarray(example.image))
        assert row["category"] == row["l2_category"] in KINDS


def test_training_prompt_uses_the_tasks_post_prompt():
    task = yaml.safe_load((tasks_dir() / "synthetic" / "synthetic_original.yaml").read_text().replace("!function", ""))
    assert task["lmms_eval_specific_kwargs"]["default"]["post_prompt"] == train.POST_PROMPT


@pytest.mark.slow
def test_demo_flags_contaminated_models_and_clears_clean_ones(tmp_path):
    """The README's main job as it runs there: every claim holds, and lmms-eval agrees with training."""
    out = tmp_path / "demo"
    command = [str(Path(sys.executable).with_name("lmms-contam")), "demo", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"report: {(out / 'report.html').resolve()}" in done.stdout
    summary = json.loads((out / "experiment.json").read_text())
    assert summary["passed"] and len(summary["checks"]) >= 8
    rows = {row["model"]: row for row in summary["rows"]}
    assert set(rows) == {"clean", "full-e30", "lora-e30", "control-e30"}
    assert 0.6 <= rows["clean"]["acc_original"] <= 0.85
    for name in ("full-e30", "lora-e30"):
        assert rows[name]["verdict"] == "contaminated"
    for name in ("clean", "control-e30"):
        assert rows[name]["verdict"] != "contaminated"
    # The clean and the fully fine-tuned model also ran the peer detectors, through lmms-eval.
    assert {name for name, row in rows.items() if row["detectors"]} == {"clean", "full-e30"}
    assert set(rows["clean"]["detectors"]) == {"circular", "option_shuffle", "text_only"}
    assert rows["clean"]["detectors"]["circular"]["signal"] <= 0  # an item counts only if every rotation is right
    assert "Peer detectors" in done.stdout and "## Peer detectors" in (out / "report.md").read_text()
    # The prompt the model was trained on is the one lmms-eval builds: its score matches a direct forward pass.
    from lmms_contam.synthetic.tiny_vlm import load_tiny_vlm

    vlm, processor = load_tiny_vlm(out / "models" / "seed0" / "clean")
    direct = train.Batcher(processor).accuracy(vlm, benchmark.original_examples(500))
    assert abs(direct - rows["clean"]["acc_original"]) < 0.02
    assert "<img" in (out / "report.html").read_text()
    rates = {data: r["image_only_rate"] for data, r in summary["image_only"].items()}
    assert rates == {"clean": 0.0, "contaminated": 1.0, "control": 0.0}
    assert "Image-only rate of the test set" in done.stdout
    # A rerun reuses every model and evaluation: same files, same figures.
    weights = sorted((out / "models").rglob("*.safetensors"))
    stamps = [p.stat().st_mtime_ns for p in weights]
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in weights] == stamps
    assert json.loads((out / "experiment.json").read_text())["rows"] == summary["rows"]
    flaw_rows = _flaw_study_in_small(command, out, rows, weights, stamps)
    _judge_study_in_small(command, out, flaw_rows, weights, stamps)


@pytest.mark.slow
def test_demo_through_vlmevalkit_flags_contaminated_models_and_clears_clean_ones(tmp_path):
    """The same experiment with VLMEvalKit as the harness: models trained on its prompt, served on 127.0.0.1,
    asked by `python -m vlmeval`'s API model and scored by its exact matching; the report reads its work dir."""
    out = tmp_path / "demo"
    command = [str(Path(sys.executable).with_name("lmms-contam")), "demo", "--host", "vlmevalkit", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"report: {(out / 'vlmevalkit' / 'report.html').resolve()}" in done.stdout
    summary = json.loads((out / "vlmevalkit" / "experiment.json").read_text())
    assert summary["passed"] and summary["setup"]["host"] == "VLMEvalKit" and len(summary["checks"]) >= 8
    rows = {row["model"]: row for row in summary["rows"]}
    assert set(rows) == {"clean", "full-e30", "lora-e30", "control-e30"}
    assert 0.6 <= rows["clean"]["acc_original"] <= 0.85
    for name in ("full-e30", "lora-e30"):
        assert rows[name]["verdict"] == "contaminated" and rows[name]["mcnemar_p"] < 0.01
    for name in ("clean", "control-e30"):
        assert rows[name]["verdict"] != "contaminated"
    report = json.loads((out / "vlmevalkit" / "report.json").read_text())
    assert {r["host"] for r in report["results"]} == {"VLMEvalKit"}
    assert all("judge exact_matching" in r["answer_matching"] for r in report["results"])
    # The model was trained on the prompt VLMEvalKit sends: its score through VLMEvalKit is a direct forward pass's.
    from lmms_contam.synthetic.tiny_vlm import load_tiny_vlm

    vlm, processor = load_tiny_vlm(out / "vlmevalkit" / "models" / "seed0" / "clean")
    direct = train.Batcher(processor, "VLMEvalKit").accuracy(vlm, benchmark.original_examples(500))
    assert abs(direct - rows["clean"]["acc_original"]) < 0.02


def _flaw_study_in_small(command: list[str], out: Path, demo_rows: dict, weights: list[Path], stamps: list[int]):
    """`demo --flaws` on the demo's models: flaws accuse the clean model until `verify` removes them."""
    done = subprocess.run([*command, "--flaws"], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in weights] == stamps  # the same models, none trained again
    study = json.loads((out / "flaws.json").read_text())
    assert study["passed"] and len(study["checks"]) == 2 + 2 * 4  # f = 0 unverified: 2; verified: 4 per rate
    rows = {(r["rate"], r["verified"], r["row"]["model"]): r for r in study["rows"]}
    assert len(rows) == 2 * 2 * 4
    for model, row in demo_rows.items():  # the unflawed set is the demo's own: the same figures
        assert rows[(0.0, False, model)]["row"]["delta"] == row["delta"]
    # 40% flawed counterfactuals accuse the clean model and the control; verification clears them.
    for model in ("clean", "control-e30"):
        before, after = rows[(0.4, False, model)]["row"], rows[(0.4, True, model)]["row"]
        assert before["delta"] < -0.05 and before["mcnemar_p"] < 0.05 and before["verdict"] == "contaminated"
        assert after["verdict"] != "contaminated"
    assert study["first_accusing_rate"] == 0.4
    screened = {s["rate"]: s for s in study["screenings"]}
    assert screened[0.4]["flawed_removed_share"] > 0.75 and screened[0.0]["flawed_removed_share"] is None
    for s in screened.values():  # every good item ambiguous by design is removed, and hardly a clear one
        assert s["ambiguous_good_removed"] == s["ambiguous_good"] > 0
        assert s["good_removed"] - s["ambiguous_good"] <= 0.01 * (s["good"] - s["ambiguous_good"])
    assert rows[(0.4, True, "clean")]["items"] == screened[0.4]["kept"] < 500
    assert "false-accusation curve" in done.stdout and "A clean model is first flagged" in done.stdout
    return rows


def _judge_study_in_small(command: list[str], out: Path, flaw_rows: dict, weights: list[Path], stamps: list[int]):
    """`demo --judge-errors` on the same models and flawed set: judges that keep flawed counterfactuals or reject
    good ones, each verifying through `verify`'s code; each model read on the items each judge kept."""
    done = subprocess.run([*command, "--judge-errors"], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in weights] == stamps
    study = json.loads((out / "judges.json").read_text())
    assert study["passed"], study["checks"]
    assert any(c["claim"].startswith("lmms-eval on the verified set") and c["passed"] for c in study["checks"])
    cells = {(c["keep_flawed"], c["reject_good"]): c for c in study["cells"]}
    assert set(cells) == {(0.0, 0.0), (0.0, 0.3), (0.2, 0.0), (0.2, 0.3)}
    ideal, keeper, rejecter = cells[(0.0, 0.0)], cells[(0.2, 0.0)], cells[(0.0, 0.3)]
    # The errorless judge is the flaw study's: the same items kept, and (restricted, not rerun) the same figures.
    assert ideal["kept"] == flaw_rows[(0.4, True, "clean")]["items"]
    for row in ideal["rows"]:
        assert row["delta"] == pytest.approx(flaw_rows[(0.4, True, row["model"])]["row"]["delta"])
    assert keeper["flawed_kept"] > ideal["flawed_kept"] and keeper["good_kept"] == ideal["good_kept"]
    assert rejecter["good_kept"] < ideal["good_kept"] and rejecter["flawed_kept"] == ideal["flawed_kept"]
    clean = {key: next(r for r in c["rows"] if r["model"] == "clean")["delta"] for key, c in cells.items()}
    assert clean[(0.2, 0.0)] < clean[(0.0, 0.0)]  # kept flaws pull an innocent model's delta down
    assert "The largest keep_flawed rate at which no clean model or control is flagged" in done.stdout
    assert (out / "judges.png").read_bytes().startswith(b"\x89PNG")


def _row(model: str, strategy: str, degree: int, seed: int, acc: float, delta: float, p: float, verdict: str):
    from lmms_contam.synthetic.experiment import Row

    return Row(model, strategy, degree, seed, acc, acc + delta, delta, (delta - 0.05, delta + 0.05), p, verdict,
               {"circle": acc, "square": acc}, {"circle": 1e-9, "square": 1e-9})  # fmt: skip


def test_checks_pass_only_when_every_claim_holds():
    from lmms_contam.synthetic.experiment import check_experiment

    good = [_row("clean", "clean", 0, s, 0.66, -0.01, 0.6, "inconclusive") for s in (0, 1)]
    good += [_row(f"full-e{d}", "full", d, s, 0.66 + d / 150, -d / 150, 10.0**-d, "contaminated")
             for s in (0, 1) for d in (10, 20, 30)]  # fmt: skip
    assert all(c.passed for c in check_experiment(good))

    bad = list(good)
    bad[0] = _row("clean", "clean", 0, 0, 0.66, -0.06, 0.01, "contaminated")  # a false alarm
    bad[-1] = _row("full-e30", "full", 30, 1, 0.70, -0.02, 0.2, "inconclusive")  # weak, not flagged, off trend
    failed = {c.claim for c in check_experiment(bad) if not c.passed}
    assert failed == {
        "clean (seed 0) not flagged",
        "full-e30 (seed 1) inflates the original score by at least 0.10",
        "full-e30 (seed 1) flagged (delta < 0, McNemar p < 0.01)",
        "full: the same verdict for every seed at each degree",
        "full: delta falls as the degree rises (Spearman <= -0.8, clean = degree 0)",
    }


def test_image_only_rates_find_the_test_items_only_where_they_were_trained_on(tmp_path):
    from lmms_contam.synthetic.experiment import rate_check
    from lmms_contam.synthetic.experiment_models import Recipe
    from lmms_contam.synthetic.image_only_rates import image_only_rates

    recipe = Recipe(test_items=12, clean_steps=4, clean_batch=16)
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

    from lmms_contam.synthetic.experiment_models import Recipe, build_models, plan

    recipe = Recipe(test_items=12, clean_steps=4, clean_batch=16, degrees=(1, 2), finetune_batch=4)
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
