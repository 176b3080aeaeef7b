"""The real lmms-eval command line in a subprocess, and its results and samples read back from disk."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import lmms_eval

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


def run_lmms_eval(args: list[str], out: Path, executable: str | None = None, timeout: int = 600) -> HarnessRun:
    """Run the real CLI in a subprocess; it exits 0 even on errors, so results are read from disk."""
    harness = executable or installed("lmms-eval", "pip install lmms-eval")
    command = [harness, *args, "--log_samples", "--output_path", str(out)]
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
