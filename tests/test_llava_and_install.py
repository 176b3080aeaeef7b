"""The plugin with a real model loader, and installed from its wheel into a fresh environment."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import metric, run_lmms_eval
from tiny_llava import build_tiny_llava

from lmms_contam.hosts.lmms_eval.scoring import PAIRED_METRICS

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def test_tiny_llava_through_lmms_eval_llava_hf_loader(with_sets, tmp_path):
    model = build_tiny_llava(tmp_path / "tiny-llava")
    run = run_lmms_eval(
        ["--model", "llava_hf", "--model_args", f"pretrained={model},device=cpu,device_map=cpu,dtype=float32",
         "--gen_kwargs", "max_new_tokens=4", "--tasks", "mmstar_contam,mmstar_text_only"],
        tmp_path / "out",
    )  # fmt: skip
    # lmms-eval's default llava_hf loader (chat) cannot take a prompt without an image: the canvas by default
    assert {s["contam_ids"]["text_only_input"] for s in run.samples["mmstar_text_only"]} == {"blank"}
    values = {m.name: metric(run, "mmstar_contam", m.name) for m in PAIRED_METRICS}
    assert all(math.isfinite(value) for value in values.values()), values
    # The statistics agree with each other: accuracies in [0, 1], delta their difference and inside its
    # interval, McNemar's p a probability.
    assert 0 <= values["acc_original"] <= 1 and 0 <= values["acc_perturbed"] <= 1
    assert values["delta"] == pytest.approx(values["acc_perturbed"] - values["acc_original"])
    assert values["delta_ci_low"] <= values["delta"] <= values["delta_ci_high"]
    assert 0 < values["mcnemar_p"] <= 1 and values["n_flagged"] <= values["n_pairs"] == 12
    assert len(run.samples["mmstar_contam"]) == 24
    assert all(isinstance(s["filtered_resps"], str) for s in run.samples["mmstar_contam"])


def test_text_only_without_an_image_through_the_simple_llava_hf_loader(with_sets, tmp_path, monkeypatch):
    """MMStar's text-only mode: no image at all, for a loader that takes a prompt without one."""
    monkeypatch.setenv("LMMS_CONTAM_TEXT_ONLY_IMAGE", "none")
    model = build_tiny_llava(tmp_path / "tiny-llava")
    run = run_lmms_eval(
        ["--model", "llava_hf", "--force_simple", "--model_args",
         f"pretrained={model},device=cpu,device_map=cpu,dtype=float32", "--gen_kwargs", "max_new_tokens=4",
         "--tasks", "mmstar_text_only"],
        tmp_path / "out",
    )  # fmt: skip
    samples = run.samples.get("mmstar_text_only")
    assert samples and len(samples) == 12, run.output[-3000:]
    assert {s["contam_ids"]["text_only_input"] for s in samples} == {"none"}
    assert 0 <= metric(run, "mmstar_text_only", "acc_text_only") <= 1


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        check=True,
        cwd=dist,
    )
    (found,) = dist.glob("lmms_contam-*.whl")
    return found


def test_wheel_ships_every_task_and_config_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (REPO / "lmms_contam" / "configs").rglob("*"):
        if path.is_file():
            assert f"lmms_contam/configs/{path.relative_to(REPO / 'lmms_contam' / 'configs')}" in names
    for path in (REPO / "lmms_contam" / "tasks").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"lmms_contam/tasks/{path.relative_to(REPO / 'lmms_contam' / 'tasks')}" in names


def test_plain_lmms_eval_finds_the_tasks_after_a_non_editable_install(wheel, with_sets, tmp_path):
    """No --include_path: the entry point registers the task folder of the installed wheel."""
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(fresh)], check=True)
    fresh_python = fresh / "bin" / "python"
    fresh_site = subprocess.run(
        [fresh_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # The heavy dependencies come from this environment (a plain path line: its .pth files, and so
    # the editable install of this checkout, are not processed).
    Path(fresh_site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([fresh_python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)

    where = subprocess.run(
        [fresh / "bin" / "lmms-contam", "tasks-dir"], check=True, capture_output=True, text=True, cwd=tmp_path
    ).stdout.strip()
    assert where.startswith(fresh_site), where
    launcher = fresh / "bin" / "lmms-eval"
    launcher.write_text(f"#!{fresh_python}\nimport sys\nfrom lmms_eval.cli.dispatch import main\nsys.exit(main())\n")
    launcher.chmod(0o755)
    cwd = Path.cwd()
    os.chdir(tmp_path)  # keep the checkout off sys.path
    try:
        run = run_lmms_eval(["--model", "dummy", "--tasks", "mmstar_perturbed"], tmp_path / "out", str(launcher))
    finally:
        os.chdir(cwd)
    assert metric(run, "mmstar_perturbed", "average") >= 0.0
    config_path = run.results["configs"]["mmstar_perturbed"]
    assert config_path["task"] == "mmstar_perturbed"
