"""Shared fixtures (offline environment, fixture sets) and the tiers: each folder's tests carry its marker.

tests/unit: no lmms-eval subprocess, no model, no server, no torch import at collection (a minute or two);
tests/integration: loopback servers, tiny models, the real lmms-eval and VLMEvalKit command lines;
tests/e2e: the demo (the experiment, the flaw and judge studies in small) and the installed wheel.
Helpers are the `helpers` package beside this file (pytest's `pythonpath` puts tests/ on the path).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.benchmark_fixtures import write_fixture_sets
from helpers.fixtures import point_at_sets

from lmms_contam.registry.specs import perturbable

BENCHMARKS = perturbable()
TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test is marked with its folder's tier, so `-m unit` and `-m "not e2e"` select by tier."""
    root = Path(__file__).parent
    for item in items:
        tier = item.path.relative_to(root).parts[0]
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in a tier folder ({', '.join(TIERS)})")
        item.add_marker(tier)


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


@pytest.fixture
def with_sets(fixture_sets, monkeypatch) -> dict[str, Path]:
    point_at_sets(monkeypatch, fixture_sets)
    return fixture_sets
