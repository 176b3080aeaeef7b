"""Evaluate model folders through a real harness: the lmms-eval CLI with its own `llava_hf` loader, or
VLMEvalKit's `python -m vlmeval` and inspect-ai's `inspect eval`, each with its OpenAI-API model asking the models
served on 127.0.0.1.

One subprocess evaluates every model (lmms-eval's `--config` takes a list of runs; VLMEvalKit's and inspect's
`--model` a list of names), so the harness starts once. An output that already holds every result asked of it is
not evaluated again; any other is cleared and evaluated afresh.
"""

from __future__ import annotations

import json
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
from lmms_contam.hosts import inspect_ai
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


def complete(out: Path, tasks: tuple[str, ...], model: Path) -> bool:
    """One results file, of a run that loaded `model` (lmms-eval names a run by that folder: a run made before the
    folder moved is redone), and the samples of every task (lmms-eval writes samples, then results)."""
    results = list(out.rglob("*_results.json")) if out.exists() else []
    if len(results) != 1:
        return False
    loaded = json.loads(results[0].read_text()).get("config", {}).get("model_args", "")
    return loaded == llava_args(model) and all(any(out.rglob(f"*_samples_{task}.jsonl")) for task in tasks)


def llava_args(folder: Path) -> str:
    """lmms-eval's `llava_hf` on the CPU, loading the model in `folder`."""
    return f"pretrained={folder},device=cpu,device_map=cpu,dtype=float32"


def executable(name: str, install: str) -> str:
    """A harness's command, this environment's first."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if not found:
        raise EvaluationError(f"{name} is not installed in this environment ({install})")
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
    pending = {name: folder for name, folder in models.items() if not complete(outputs[name], tasks[name], folder)}
    if pending:
        runs = []
        for name, folder in pending.items():
            shutil.rmtree(outputs[name], ignore_errors=True)  # a partial or older run would be read twice
            runs.append(
                {
                    "model": "llava_hf",
                    "model_args": llava_args(folder),
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
                [executable("lmms-eval", "pip install lmms-eval"), "--config", str(config)],
                stdout=stream,
                stderr=subprocess.STDOUT,
                env=env,
                check=False,
            )
    missing = [name for name, folder in models.items() if not complete(outputs[name], tasks[name], folder)]
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


INSPECT_PROVIDER = "lab"  # inspect's `openai-api/lab/<model>` reads LAB_BASE_URL and LAB_API_KEY


def inspect_model(name: str) -> str:
    """The name inspect asks a served model under (and the report labels its runs with)."""
    return f"openai-api/{INSPECT_PROVIDER}/{name}"


def evaluate_inspect(models: dict[str, Path], test_set: Path, out: Path, log: Path) -> Path:
    """Evaluate each model (by name) on the plugin's paired task in inspect's registry, asked by `inspect eval`'s
    OpenAI-API model through the model server with inspect's own solver and scorer; returns the log folder the
    report reads."""
    logs = out / "logs"
    if _inspect_finished(logs, models):
        return logs
    shutil.rmtree(out, ignore_errors=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with ServedModels(models) as server, open(log, "a", encoding="utf-8") as stream:
        env = {
            **os.environ,
            env_var("synthetic"): str(test_set),
            "LAB_BASE_URL": server.base_url,
            "LAB_API_KEY": "local",
            "XDG_DATA_HOME": str(out / "data"),  # inspect's own state stays in the run's folder
            "XDG_CACHE_HOME": str(out / "cache"),
        }
        inspect = executable("inspect", 'pip install "lmms-contam[inspect]"')
        command = [inspect, "eval", *_inspect_arguments(models, logs)]
        subprocess.run(command, stdout=stream, stderr=subprocess.STDOUT, check=False, env=env)
    if not _inspect_finished(logs, models):
        raise EvaluationError(f"inspect wrote no finished log for every model; see {log}")
    return logs


def _inspect_arguments(models: dict[str, Path], logs: Path) -> list[str]:
    """The paired task for every model, retried once, images not copied into the logs (the set holds them)."""
    task = f"{inspect_ai.PACKAGE}/{PERTURBATION_TASK}"
    asked = ",".join(inspect_model(name) for name in models)
    settings = {
        "--log-dir": str(logs),
        "--display": "plain",
        "--max-retries": "1",
        "--timeout": "300",
        "--max-connections": "16",
        "--max-tokens": str(MAX_NEW_TOKENS),
        "--ctl-server": "false",
    }
    return [task, "--model", asked, "--no-log-images", *(part for pair in settings.items() for part in pair)]


def _inspect_finished(logs: Path, models: dict[str, Path]) -> bool:
    """One successful log per model (the report checks each one's samples and scores when it reads them)."""
    from inspect_ai.log import read_eval_log

    from lmms_contam.hosts.inspect_ai.log_files import log_files

    if not logs.is_dir():
        return False
    headers = [read_eval_log(str(path), header_only=True) for path in log_files([logs])]
    finished = sorted(h.eval.model for h in headers if h.status == "success")
    return finished == sorted(inspect_model(name) for name in models)
