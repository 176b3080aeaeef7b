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


def fresh_install(wheel: Path, folder: Path) -> tuple[Path, str]:
    """A new virtual environment holding the wheel alone (not editable); returns its folder and site-packages."""
    fresh = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(fresh)], check=True)
    fresh_site = subprocess.run(
        [fresh / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # The heavy dependencies come from this environment (a plain path line: its .pth files, and so
    # the editable install of this checkout, are not processed).
    Path(fresh_site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([fresh / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True)  # fmt: skip
    return fresh, fresh_site


def test_plain_lmms_eval_finds_the_tasks_after_a_non_editable_install(wheel, with_sets, tmp_path):
    """No --include_path: the entry point registers the task folder of the installed wheel."""
    fresh, fresh_site = fresh_install(wheel, tmp_path)
    fresh_python = fresh / "bin" / "python"

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


def test_plain_inspect_finds_the_tasks_after_a_non_editable_install(wheel, with_sets, tmp_path):
    """inspect names a package's tasks by the package their module is installed in: from the wheel, as from the
    checkout, `inspect eval lmms_contam/mmstar_contam` finds the task and logs it under that name."""
    pytest.importorskip("inspect_ai", reason="inspect-ai needs Python 3.11 (the [inspect] extra)")
    from helpers.loopback import LoopbackServer, completion
    from inspect_ai.log import read_eval_log

    fresh, _ = fresh_install(wheel, tmp_path)
    logs = tmp_path / "logs"
    command = [fresh / "bin" / "python", "-m", "inspect_ai", "eval", "lmms_contam/mmstar_contam", "--model",
               "openai-api/stub/any", "--limit", "2", "--log-dir", logs, "--display", "plain", "--max-retries", "0",
               "--timeout", "60", "--ctl-server", "false"]  # fmt: skip
    with LoopbackServer(lambda body, number: (200, completion("ANSWER: A"), 0.0)) as server:
        env = {**os.environ, "STUB_API_KEY": "not-a-secret", "STUB_BASE_URL": server.base_url,
               "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip
        done = subprocess.run(list(map(str, command)), cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log,) = logs.glob("*.eval")
    header = read_eval_log(str(log), header_only=True)
    assert header.eval.task == "lmms_contam/mmstar_contam" and header.status == "success"
    assert header.eval.packages.get("lmms-contam") and header.results.total_samples == 2
    assert len(server.requests) == 2
