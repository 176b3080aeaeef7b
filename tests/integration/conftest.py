"""Fixtures several integration modules share, built once per module that asks for them."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.authors_release import write_authors_release
from helpers.perturb_runs import mmstar_originals, tiny_flux_in_hub
from helpers.verify_runs import imported_set


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict[str, Path]:
    """An original MMStar copy (hub schema) and a release in the authors' format, with their quirks."""
    return write_authors_release(tmp_path_factory.mktemp("release"))


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    return mmstar_originals(tmp_path_factory.mktemp("originals"))


@pytest.fixture(scope="module")
def flux(tmp_path_factory) -> dict:
    """One tiny Flux ControlNet for every run in a module."""
    return tiny_flux_in_hub(tmp_path_factory.mktemp("flux"))


@pytest.fixture
def imported(tmp_path) -> Path:
    """The fixture's MMStar set as `import mm-perturb` leaves it: data.parquet and an unverified manifest."""
    return imported_set(tmp_path)
