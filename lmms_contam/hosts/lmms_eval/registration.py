"""Makes plain `lmms-eval --tasks mmstar_perturbed` find the plugin's tasks.

lmms-eval has no entry point for tasks, but it loads the `lmms_eval.models` entry points while
`lmms_eval.models` is imported, before `__main__` builds its TaskManager. `register` is that entry
point: it adds the plugin's task folder to every TaskManager's search path and returns the
manifests of the plugin's test models. If lmms-eval's internals change, it warns once and leaves
the harness untouched; `--include_path $(lmms-contam tasks-dir)` always works.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from pathlib import Path

_PATCH_MARK = "_lmms_contam_search_path"


def tasks_dir() -> Path:
    return Path(__file__).resolve().parent / "tasks"


def fallback_hint() -> str:
    return f"pass --include_path {tasks_dir()} to lmms-eval (`lmms-contam tasks-dir` prints it)"


def with_plugin_tasks(include_path: str | list[str] | None) -> list[str]:
    """The caller's include path with the plugin's task folder appended once."""
    paths = [include_path] if isinstance(include_path, str) else list(include_path or [])
    ours = str(tasks_dir())
    if not any(os.path.realpath(p) == os.path.realpath(ours) for p in paths):
        paths.append(ours)
    return paths


def extend_task_search_path() -> bool:
    """Patch TaskManager.initialize_tasks once; False (with one warning) if that is not possible."""
    try:
        from lmms_eval.tasks import TaskManager

        original = TaskManager.initialize_tasks
        if getattr(original, _PATCH_MARK, False):
            return True
        signature = inspect.signature(original)
        if "include_path" not in signature.parameters:
            raise TypeError("TaskManager.initialize_tasks has no include_path parameter")

        @functools.wraps(original)
        def initialize_tasks(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.arguments["include_path"] = with_plugin_tasks(bound.arguments.get("include_path"))
            return original(*bound.args, **bound.kwargs)

        setattr(initialize_tasks, _PATCH_MARK, True)
        TaskManager.initialize_tasks = initialize_tasks
        return True
    except Exception as exc:  # never break the harness over a convenience
        warnings.warn(
            f"lmms-contam could not register its tasks with this lmms-eval ({exc}); {fallback_hint()}",
            RuntimeWarning,
            stacklevel=2,
        )
        return False


def test_model_manifests() -> list:
    """Deterministic models for tests and sanity checks, named so nobody mistakes them for real ones."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [
        ModelManifest(model_id=model_id, simple_class_path=f"lmms_contam.hosts.lmms_eval.reference_models.{cls}")
        for model_id, cls in (
            ("contam_test_oracle", "OracleTestModel"),
            ("contam_test_memoriser", "MemoriserTestModel"),
            ("contam_test_contaminated", "ContaminatedTestModel"),
        )
    ]


def register() -> list:
    """The `lmms_eval.models` entry point."""
    extend_task_search_path()
    try:
        return test_model_manifests()
    except Exception as exc:
        warnings.warn(f"lmms-contam could not register its test models ({exc})", RuntimeWarning, stacklevel=2)
        return []
