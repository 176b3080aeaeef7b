"""The demo end to end: every model trained, evaluated by each harness, reported and checked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_contam.lab import train
from lmms_contam.synthetic import benchmark

# Test items of every demo here: the README's default of 500 takes twice as long for the same code (its figures are
# in docs/results/experiment.md); at 200 every check still passes (through lmms-eval on 2026-12-07: full-e30 p
# 7.5e-20, lora-e30 p 8.1e-28, clean p 0.58, control p 0.25).
ITEMS = 200


def test_demo_flags_contaminated_models_and_clears_clean_ones(tmp_path):
    """The README's main job through lmms-eval, then its flaw and judge studies on the same models: every claim
    holds, and lmms-eval agrees with training."""
    out = tmp_path / "demo"
    command = [str(Path(sys.executable).with_name("lmms-contam")), "demo", "--items", str(ITEMS), "--out", str(out)]
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
    from lmms_contam.lab.tiny_vlm import load_tiny_vlm

    vlm, processor = load_tiny_vlm(out / "models" / "seed0" / "clean")
    direct = train.Batcher(processor).accuracy(vlm, benchmark.original_examples(ITEMS))
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
    _a_run_of_another_set_is_refused(command, out)


# Each harness that asks the served models: its --host key, its name in the report, how its answers are matched.
SERVED_HOSTS = {
    "vlmevalkit": ("VLMEvalKit", "judge exact_matching"),
    "inspect": ("inspect-ai", "inspect's multiple_choice() prompt and choice() scorer"),
}


@pytest.mark.parametrize("host", SERVED_HOSTS)
def test_demo_through_a_served_host_flags_contaminated_models_and_clears_clean_ones(tmp_path, host):
    """The same experiment with VLMEvalKit or inspect-ai as the harness: models trained on its prompt
    (and, for inspect, its reply format), served on 127.0.0.1, asked by its own API model and scored by its own
    matching; the report reads its outputs."""
    if host == "inspect":
        pytest.importorskip("inspect_ai", reason="inspect-ai needs Python 3.11 (the [inspect] extra)")
    name, matching = SERVED_HOSTS[host]
    out = tmp_path / "demo"
    command = [str(Path(sys.executable).with_name("lmms-contam")), "demo", "--host", host, "--items", str(ITEMS),
               "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"report: {(out / host / 'report.html').resolve()}" in done.stdout
    summary = json.loads((out / host / "experiment.json").read_text())
    assert summary["passed"] and summary["setup"]["host"] == name and len(summary["checks"]) >= 8
    rows = {row["model"]: row for row in summary["rows"]}
    assert set(rows) == {"clean", "full-e30", "lora-e30", "control-e30"}
    assert 0.6 <= rows["clean"]["acc_original"] <= 0.85
    for model in ("full-e30", "lora-e30"):
        assert rows[model]["verdict"] == "contaminated" and rows[model]["mcnemar_p"] < 0.01
    for model in ("clean", "control-e30"):
        assert rows[model]["verdict"] != "contaminated"
    report = json.loads((out / host / "report.json").read_text())
    assert {r["host"] for r in report["results"]} == {name} and len(report["results"]) == 4
    assert all(matching in r["answer_matching"] for r in report["results"])
    # The model was trained on the prompt the harness sends: its score through it is a direct forward pass's.
    from lmms_contam.lab.tiny_vlm import load_tiny_vlm

    vlm, processor = load_tiny_vlm(out / host / "models" / "seed0" / "clean")
    direct = train.Batcher(processor, name).accuracy(vlm, benchmark.original_examples(ITEMS))
    assert abs(direct - rows["clean"]["acc_original"]) < 0.02


def _flaw_study_in_small(command: list[str], out: Path, demo_rows: dict, weights: list[Path], stamps: list[int]):
    """`demo --flaws` on the demo's models: flaws accuse the clean model until `verify` removes them."""
    done = subprocess.run([*command, "--flaws"], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in weights] == stamps  # the same models, none trained again
    study = json.loads((out / "flaws.json").read_text())
    # f = 0 unverified: 2; verified: 4 per rate; one kept subset run directly equals its reading from the whole run
    assert study["passed"] and len(study["checks"]) == 1 + 2 + 2 * 4
    assert study["checks"][0]["claim"].startswith("lmms-eval on the verified set of f = 0.40 scores clean")
    rows = {(r["rate"], r["verified"], r["row"]["model"]): r for r in study["rows"]}
    assert len(rows) == 2 * 2 * 4
    # The unflawed set is the demo's own by content: its runs are read, not repeated, and give the same figures.
    assert (out / "flaws" / "eval" / "f0.40-unverified").is_dir()
    assert not (out / "flaws" / "eval" / "f0.00-unverified").exists()
    for model, row in demo_rows.items():
        assert rows[(0.0, False, model)]["row"]["delta"] == row["delta"]
    # 40% flawed counterfactuals pull the clean model's and the control's deltas down and accuse the clean model;
    # verification clears both. (At 200 items the control's drop is not always significant: p 0.10 in one CI run.)
    for model in ("clean", "control-e30"):
        before, after = rows[(0.4, False, model)]["row"], rows[(0.4, True, model)]["row"]
        assert before["delta"] < rows[(0.0, False, model)]["row"]["delta"] - 0.05
        assert after["verdict"] != "contaminated"
    accused = rows[(0.4, False, "clean")]["row"]
    assert accused["delta"] < -0.05 and accused["mcnemar_p"] < 0.05 and accused["verdict"] == "contaminated"
    assert study["first_accusing_rate"] == 0.4
    screened = {s["rate"]: s for s in study["screenings"]}
    assert screened[0.4]["flawed_removed_share"] > 0.75 and screened[0.0]["flawed_removed_share"] is None
    for s in screened.values():  # every good item ambiguous by design is removed, and hardly a clear one
        assert s["ambiguous_good_removed"] == s["ambiguous_good"] > 0
        assert s["good_removed"] - s["ambiguous_good"] <= 0.01 * (s["good"] - s["ambiguous_good"])
    assert rows[(0.4, True, "clean")]["items"] == screened[0.4]["kept"] < ITEMS
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


def _a_run_of_another_set_is_refused(command: list[str], out: Path) -> None:
    """A finished run in the study's folder that scored another set (here the demo's, on the unflawed set) is
    refused by the manifest its records name, not read as a run of the flawed set."""
    reused = out / "flaws" / "eval" / "f0.40-unverified" / "seed0-clean"
    shutil.rmtree(reused)
    shutil.copytree(out / "eval" / "seed0" / "clean", reused)
    done = subprocess.run([*command, "--flaws"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "scored the set whose manifest has SHA-256" in done.stderr, done.stderr[-3000:]
    assert f"{reused}/" in done.stderr and "f0.40/data.parquet" in done.stderr, done.stderr[-3000:]
