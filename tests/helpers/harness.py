"""The real lmms-eval command line in a subprocess, and its results and samples read back from disk."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import lmms_eval
import yaml

from lmms_contam.lab.evaluate import executable as installed

BUILTIN_TASKS = Path(lmms_eval.__file__).parent / "tasks"  # lmms-eval's own task YAMLs
# The benchmarks with a masked-option task: it replaces a post-prompt asking for the letter, so where the request
# is in the question (RealWorldQA) or in the template (SEED-Bench, MMMU) there is none.
MASKED_OPTION_BENCHMARKS = ("mmstar", "synthetic", "synthetic_varied", "mmbench", "ai2d", "scienceqa")


@dataclass
class HarnessRun:
    output: str
    results: dict
    samples: dict[str, list[dict]]
    folder: Path  # where it wrote them: what `lmms-contam report` reads


def run_lmms_eval(args: list[str], out: Path, executable: str | None = None, timeout: int = 600) -> HarnessRun:
    """Run the real CLI in a subprocess; it exits 0 even on errors, so results are read from disk."""
    harness = executable or installed("lmms-eval", "pip install lmms-eval")
    command = [harness, *args, "--log_samples", "--output_path", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    return read_run(out, proc.stdout + proc.stderr)


def run_lmms_eval_together(runs: dict[str, dict], root: Path, timeout: int = 900) -> dict[str, HarnessRun]:
    """Several runs in one lmms-eval process through its `--config` list, each given as that file's keys (model,
    model_args, tasks, limit, ...): the harness starts once (about 15 s a start here), and each run still writes
    its own folder, `root/<name>`, read back as `run_lmms_eval`'s is. A run that fails leaves no results."""
    root.mkdir(parents=True, exist_ok=True)
    config = [{**settings, "log_samples": True, "output_path": str(root / name)} for name, settings in runs.items()]
    (root / "runs.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    command = [installed("lmms-eval", "pip install lmms-eval"), "--config", str(root / "runs.yaml")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    return {name: read_run(root / name, proc.stdout + proc.stderr) for name in runs}


def read_run(out: Path, output: str) -> HarnessRun:
    """One run's results and samples, from the folder it was told to write."""
    results_files = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    results = json.loads(Path(results_files[0]).read_text()) if results_files else {}
    samples = {}
    for path in glob.glob(str(out / "**" / "*_samples_*.jsonl"), recursive=True):
        task = Path(path).stem.split("_samples_", 1)[1]
        samples[task] = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return HarnessRun(output=output, results=results, samples=samples, folder=out)


def metric(run: HarnessRun, task: str, name: str) -> float:
    assert task in run.results.get("results", {}), f"no results for {task}; output tail:\n{run.output[-4000:]}"
    return run.results["results"][task][f"{name},none"]


def builtins_by_reply(letter: str) -> dict[str, tuple[str, ...]]:
    """The benchmarks whose lmms-eval built-in task a test runs beside the plugin's on the same items, by the
    constant reply a dummy model gives them: `letter` for the lettered ones, "Yes" for MME."""
    return {letter: ("mmstar", "realworldqa", "seedbench", "mmbench", "scienceqa", "ai2d", "mmmu"), "Yes": ("mme",)}
