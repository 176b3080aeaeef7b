"""The entry point adds the task folder to lmms-eval's search path, and degrades to a warning."""

import lmms_eval.tasks
import pytest

from lmms_contam.hosts.lmms_eval import registration


def test_plain_task_manager_indexes_the_plugin_tasks_once():
    registration.register()
    registration.register()  # idempotent: the loader may import entry points more than once
    manager = lmms_eval.tasks.TaskManager()
    for name in ("mmstar_perturbed", "realworldqa_original", "naturalbench_contam", "contam_paired"):
        assert name in manager.all_tasks
    assert manager._task_index["mmstar_contam"]["yaml_path"].startswith(str(registration.tasks_dir()))
    explicit = lmms_eval.tasks.TaskManager(include_path=str(registration.tasks_dir()))
    assert explicit.all_tasks == manager.all_tasks


TEST_MODELS = ("contam_test_oracle", "contam_test_memoriser", "contam_test_contaminated")


def test_test_models_are_resolvable_by_the_harness_registry():
    from lmms_eval.models import MODEL_REGISTRY_V2

    for name in TEST_MODELS:
        cls = MODEL_REGISTRY_V2.get_model_class(name)
        assert cls.__module__ == "lmms_contam.hosts.lmms_eval.reference_models"


def test_changed_internals_give_one_warning_naming_the_fallback(monkeypatch):
    class FutureTaskManager:  # a later lmms-eval whose indexer no longer takes include_path
        def initialize_tasks(self, paths=None):
            return {}

    monkeypatch.setattr(lmms_eval.tasks, "TaskManager", FutureTaskManager)
    with pytest.warns(RuntimeWarning, match=r"--include_path .*lmms-contam tasks-dir"):
        assert registration.extend_task_search_path() is False
    assert "initialize_tasks" in FutureTaskManager.__dict__
    assert not hasattr(FutureTaskManager.initialize_tasks, "_lmms_contam_search_path")
    # The entry point itself never raises into the harness: it still registers the test models.
    with pytest.warns(RuntimeWarning, match="could not register its tasks"):
        manifests = registration.register()
    assert {m.model_id for m in manifests} == set(TEST_MODELS)


def test_include_path_is_kept_and_not_duplicated():
    ours = str(registration.tasks_dir())
    assert registration.with_plugin_tasks(None) == [ours]
    assert registration.with_plugin_tasks("/x") == ["/x", ours]
    assert registration.with_plugin_tasks(["/x", ours]) == ["/x", ours]
