"""Evaluate model folders through the real lmms-eval CLI, with its own `llava_hf` loader.

One subprocess evaluates every model (lmms-eval's `--config` takes a list of runs), so the
harness starts once. Each model writes its own output folder; one that already holds results
is not evaluated again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from lmms_contam.atomic import atomic_path
from lmms_contam.harness.datasets import env_var

TASK = "synthetic_contam"


class EvaluationError(RuntimeError):
    pass


def results_of(out: Path) -> list[Path]:
    return sorted(out.rglob("*_results.json")) if out.exists() else []


def lmms_eval_executable() -> str:
    found = shutil.which("lmms-eval", path=str(Path(sys.executable).parent)) or shutil.which("lmms-eval")
    if not found:
        raise EvaluationError("lmms-eval is not installed in this environment (pip install lmms-eval)")
    return found


def evaluate(models: dict[str, Path], test_set: Path, out: Path, log: Path) -> dict[str, Path]:
    """Returns {model name: its lmms-eval output folder}; raises naming any model that produced nothing."""
    outputs = {name: out / name for name in models}
    pending = {name: folder for name, folder in models.items() if not results_of(outputs[name])}
    if pending:
        runs = [
            {
                "model": "llava_hf",
                "model_args": f"pretrained={folder},device=cpu,device_map=cpu,dtype=float32",
                "tasks": TASK,
                "batch_size": 1,
                "log_samples": True,
                "output_path": str(outputs[name]),
            }
            for name, folder in pending.items()
        ]
        config = out / "lmms-eval-runs.yaml"
        with atomic_path(config) as tmp:
            tmp.write_text(yaml.safe_dump(runs, sort_keys=False))
        # Everything is local: the harness must not reach for the hub on a machine without network.
        env = {**os.environ, env_var("synthetic"): str(test_set), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as stream:
            subprocess.run([lmms_eval_executable(), "--config", str(config)], stdout=stream, stderr=subprocess.STDOUT,
                           env=env, check=False)  # fmt: skip
    missing = [name for name in models if not results_of(outputs[name])]
    if missing:
        raise EvaluationError(f"lmms-eval wrote no results for {', '.join(missing)}; see {log}")
    return outputs
