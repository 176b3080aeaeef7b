"""Evaluate model folders through a real harness: the lmms-eval CLI with its own `llava_hf` loader, or
VLMEvalKit's `python -m vlmeval` with its OpenAI-API model asking the models served on 127.0.0.1.

One subprocess evaluates every model (lmms-eval's `--config` takes a list of runs; VLMEvalKit's `--model`
a list of names), so the harness starts once. An output that already holds every result asked of it is
not evaluated again; any other is cleared and evaluated afresh.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.vlmevalkit.bindings import dataset_name
from lmms_contam.hosts.vlmevalkit.export import export_set
from lmms_contam.hosts.vlmevalkit.hits import EXACT_MATCHING
from lmms_contam.lab.model_server import MAX_NEW_TOKENS, ServedModels
from lmms_contam.records import CONTAM
from lmms_contam.set_locations import env_var

PERTURBATION_TASK = "synthetic_contam"
# The demo's models answer with a letter only (train.py), so the detectors that ask for a letter: masked-option
# guessing asks for an option's text, which only the race's models are trained to give.
DETECTOR_TASKS = tuple(f"synthetic_{name}" for name, detector in DETECTORS.items() if not detector.scores_reply)


class EvaluationError(RuntimeError):
    pass


@contextmanager
def resolving(test_set: Path, benchmark: str = "synthetic") -> Iterator[None]:
    """The procedural benchmark's tasks (and exports) resolve `test_set` for the duration."""
    name = env_var(benchmark)
    before = os.environ.get(name)
    os.environ[name] = str(test_set)
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


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


def evaluate(
    models: dict[str, Path],
    tasks: dict[str, tuple[str, ...]],
    test_set: Path,
    out: Path,
    log: Path,
    benchmark: str = "synthetic",
) -> dict[str, Path]:
    """Evaluate each model on its tasks; returns {model name: its lmms-eval output folder}.

    Raises naming any model whose folder lacks a task's samples afterwards.
    """
    outputs = {name: out / name for name in models}
    pending = {name: folder for name, folder in models.items() if not complete(outputs[name], tasks[name])}
    if pending:
        runs = []
        for name, folder in pending.items():
            shutil.rmtree(outputs[name], ignore_errors=True)  # a partial or older run would be read twice
            runs.append(
                {
                    "model": "llava_hf",
                    "model_args": f"pretrained={folder},device=cpu,device_map=cpu,dtype=float32",
                    "tasks": ",".join(tasks[name]),
                    "batch_size": 1,
                    "log_samples": True,
                    "output_path": str(outputs[name]),
                }
            )
        config = out / "lmms-eval-runs.yaml"
        with atomic_path(config) as tmp:
            tmp.write_text(yaml.safe_dump(runs, sort_keys=False))
        # Everything is local: the harness must not reach for the hub on a machine without network.
        env = {**os.environ, env_var(benchmark): str(test_set), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as stream:
            subprocess.run(
                [lmms_eval_executable(), "--config", str(config)],
                stdout=stream,
                stderr=subprocess.STDOUT,
                env=env,
                check=False,
            )
    missing = [name for name in models if not complete(outputs[name], tasks[name])]
    if missing:
        raise EvaluationError(f"lmms-eval wrote no complete results for {', '.join(missing)}; see {log}")
    return outputs


def evaluate_vlmevalkit(models: dict[str, Path], test_set: Path, out: Path, log: Path) -> Path:
    """Evaluate each model (by name) on the test set exported for VLMEvalKit, asked by VLMEvalKit's API model
    through the model server, scored by its exact matching; returns the work dir the report reads."""
    dataset, work = dataset_name("synthetic"), out / "work"
    results = [work / name / f"{name}_{dataset}_{EXACT_MATCHING}_result.xlsx" for name in models]
    if all(path.is_file() for path in results):
        return work
    shutil.rmtree(work, ignore_errors=True)
    lmudata = out / "LMUData"
    with resolving(test_set):
        export_set("synthetic", CONTAM, lmudata)
    log.parent.mkdir(parents=True, exist_ok=True)
    with ServedModels(models) as server, open(log, "a", encoding="utf-8") as stream:
        command = [
            sys.executable,
            "-m",
            "vlmeval",
            "--data",
            dataset,
            "--model",
            *models,
            "--base-url",
            server.base_url,
            "--local-media",
            "--judge",
            EXACT_MATCHING,
            "--work-dir",
            str(work),
            "--api-nproc",
            "16",
            "--retry",
            "1",
            "--max-tokens",
            str(MAX_NEW_TOKENS),
        ]
        subprocess.run(
            command, stdout=stream, stderr=subprocess.STDOUT, check=False, env={**os.environ, "LMUData": str(lmudata)}
        )
    missing = [name for name, path in zip(models, results, strict=True) if not path.is_file()]
    if missing:
        raise EvaluationError(f"VLMEvalKit wrote no result for {', '.join(missing)}; see {log}")
    return work
