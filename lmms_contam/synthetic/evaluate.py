"""Evaluate model folders through the real lmms-eval CLI, with its own `llava_hf` loader.

One subprocess evaluates every model (lmms-eval's `--config` takes a list of runs), so the
harness starts once. Each model writes its own output folder; one that already holds samples of
every task asked of it is not evaluated again, and any other is cleared and evaluated afresh.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.signals import DETECTORS
from lmms_contam.set_locations import env_var

PERTURBATION_TASK = "synthetic_contam"
DETECTOR_TASKS = tuple(f"synthetic_{detector}" for detector in DETECTORS)


class EvaluationError(RuntimeError):
    pass


def complete(out: Path, tasks: tuple[str, ...]) -> bool:
    """One results file, and the samples of every task (lmms-eval writes samples, then results)."""
    if not out.exists() or len(list(out.rglob("*_results.json"))) != 1:
        return False
    return all(any(out.rglob(f"*_samples_{task}.jsonl")) for task in tasks)


def lmms_eval_executable() -> str:
    found = shutil.which("lmms-eval", path=str(Path(sys.executable).parent)) or shutil.which("lmms-eval")
    if not found:
        raise EvaluationError("lmms-eval is not installed in this environment (pip install lmms-eval)")
    return found


def evaluate(models: dict[str, Path], tasks: dict[str, tuple[str, ...]], test_set: Path, out: Path, log: Path
             ) -> dict[str, Path]:  # fmt: skip
    """Evaluate each model on its tasks; returns {model name: its lmms-eval output folder}.

    Raises naming any model whose folder lacks a task's samples afterwards.
    """
    outputs = {name: out / name for name in models}
    pending = {name: folder for name, folder in models.items() if not complete(outputs[name], tasks[name])}
    if pending:
        runs = []
        for name, folder in pending.items():
            shutil.rmtree(outputs[name], ignore_errors=True)  # a partial or older run would be read twice
            runs.append({
                "model": "llava_hf",
                "model_args": f"pretrained={folder},device=cpu,device_map=cpu,dtype=float32",
                "tasks": ",".join(tasks[name]),
                "batch_size": 1,
                "log_samples": True,
                "output_path": str(outputs[name]),
            })  # fmt: skip
        config = out / "lmms-eval-runs.yaml"
        with atomic_path(config) as tmp:
            tmp.write_text(yaml.safe_dump(runs, sort_keys=False))
        # Everything is local: the harness must not reach for the hub on a machine without network.
        env = {**os.environ, env_var("synthetic"): str(test_set), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as stream:
            subprocess.run([lmms_eval_executable(), "--config", str(config)], stdout=stream, stderr=subprocess.STDOUT,
                           env=env, check=False)  # fmt: skip
    missing = [name for name in models if not complete(outputs[name], tasks[name])]
    if missing:
        raise EvaluationError(f"lmms-eval wrote no complete results for {', '.join(missing)}; see {log}")
    return outputs
