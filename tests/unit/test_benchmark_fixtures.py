"""Every benchmark the registry knows has the test fixture its spec needs, in one table."""

from __future__ import annotations

import pytest
from helpers.benchmark_fixtures import FIXTURES, fixture_of

from lmms_contam.registry.specs import SPECS, perturbable, scannable

PROCEDURAL = ("synthetic", "synthetic_varied")  # each writes its own set (benchmark.build_test_set)


@pytest.mark.parametrize("benchmark", list(SPECS))
def test_every_spec_has_the_fixture_its_tasks_need(benchmark):
    fixture = fixture_of(benchmark)
    if benchmark in perturbable() and benchmark not in PROCEDURAL:
        assert fixture.set_rows is not None, f"{benchmark}: perturbable, but no set_rows builder"
    if benchmark in scannable():
        assert fixture.hub_rows is not None, f"{benchmark}: scannable, but no hub_rows builder"


def test_a_benchmark_without_a_fixture_fails_naming_it():
    with pytest.raises(LookupError, match="newbench: no test fixture; add a BenchmarkFixture"):
        fixture_of("newbench")
    assert set(FIXTURES) == set(SPECS), "fixtures of benchmarks the registry does not know"
