"""Shared fixtures: offline environment, fixture sets, and a runner for the real lmms-eval CLI."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures import write_fixture_sets  # noqa: E402

from lmms_contam.registry.specs import PERTURBABLE
from lmms_contam.synthetic.evaluate import lmms_eval_executable  # noqa: E402

BENCHMARKS = PERTURBABLE


@pytest.fixture(scope="session", autouse=True)
def offline_environment(tmp_path_factory):
    """No test reaches the network or the home folder."""
    cache = tmp_path_factory.getbasetemp() / "caches"
    with pytest.MonkeyPatch.context() as monkeypatch:
        _set_offline(monkeypatch, cache)
        yield


def _set_offline(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    for name, value in {
        "HF_HOME": cache / "hf",
        "HF_DATASETS_CACHE": cache / "hf" / "datasets",
        "TORCH_HOME": cache / "torch",
        "XDG_CACHE_HOME": cache / "xdg",
        "SCIKIT_LEARN_DATA": cache / "sklearn",
        "LMMS_CONTAM_HOME": cache / "lmms-contam-home",
        "LMMS_CONTAM_CONFIG": cache / "no-config.yaml",
    }.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def no_sets_unless_asked(monkeypatch):
    for benchmark in BENCHMARKS:
        monkeypatch.delenv(f"LMMS_CONTAM_DATASET_{benchmark.upper()}", raising=False)


@pytest.fixture(scope="session")
def fixture_sets(tmp_path_factory) -> dict[str, Path]:
    return write_fixture_sets(tmp_path_factory.mktemp("sets"))


def point_at_sets(monkeypatch: pytest.MonkeyPatch, sets: dict[str, Path]) -> None:
    for benchmark, path in sets.items():
        monkeypatch.setenv(f"LMMS_CONTAM_DATASET_{benchmark.upper()}", str(path))


@pytest.fixture
def with_sets(fixture_sets, monkeypatch) -> dict[str, Path]:
    point_at_sets(monkeypatch, fixture_sets)
    return fixture_sets


@dataclass
class HarnessRun:
    output: str
    results: dict
    samples: dict[str, list[dict]]


def run_lmms_eval(args: list[str], out: Path, executable: str | None = None, timeout: int = 600) -> HarnessRun:
    """Run the real CLI in a subprocess; it exits 0 even on errors, so results are read from disk."""
    command = [executable or lmms_eval_executable(), *args, "--log_samples", "--output_path", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    output = proc.stdout + proc.stderr
    results_files = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    results = json.loads(Path(results_files[0]).read_text()) if results_files else {}
    samples = {}
    for path in glob.glob(str(out / "**" / "*_samples_*.jsonl"), recursive=True):
        task = Path(path).stem.split("_samples_", 1)[1]
        samples[task] = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return HarnessRun(output=output, results=results, samples=samples)


def metric(run: HarnessRun, task: str, name: str) -> float:
    assert task in run.results.get("results", {}), f"no results for {task}; output tail:\n{run.output[-4000:]}"
    return run.results["results"][task][f"{name},none"]
