"""The wheel: built, installed without the checkout, and found by plain lmms-eval."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers.harness import metric, run_lmms_eval
from helpers.paths import REPO


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
