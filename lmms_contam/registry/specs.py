"""The registry of benchmarks: every `BenchmarkSpec` (registry/benchmarks/, or added by another package), by name.

The loaders, the schema, the detectors, the report and the command line ask it which benchmarks there are and
what each is; the lists below are computed when asked, so a benchmark added after import is in them. How a
harness runs a benchmark is that host's binding (hosts/lmms_eval/bindings.py, hosts/vlmevalkit/bindings.py).
"""

from __future__ import annotations

from lmms_contam.listing import add_once
from lmms_contam.registry.base import BenchmarkSpec
from lmms_contam.registry.benchmarks import MODULES

SPECS: dict[str, BenchmarkSpec] = {module.SPEC.name: module.SPEC for module in MODULES}


def add_benchmark(benchmark: BenchmarkSpec) -> None:
    """Make every part of the project know `benchmark` (one of another package, or a test's)."""
    listed = SPECS[benchmark.name].label if benchmark.name in SPECS else ""
    add_once(SPECS, benchmark.name, benchmark, f"a benchmark named {benchmark.name!r} is already listed: {listed}")


def spec(name: str) -> BenchmarkSpec:
    if name not in SPECS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(SPECS))}")
    return SPECS[name]


def scannable() -> tuple[str, ...]:
    """The benchmarks with a hub source and a row parser: scan, judge and the `*_scanned` tasks."""
    return tuple(name for name, known in SPECS.items() if known.scannable)


def perturbable() -> tuple[str, ...]:
    """The benchmarks with perturbed sets: the perturbation tasks and the exports."""
    return tuple(name for name, known in SPECS.items() if known.perturbable)


def perturb_from_hub() -> tuple[str, ...]:
    """The benchmarks `lmms-contam perturb` builds sets of from their hub rows."""
    return tuple(name for name, known in SPECS.items() if known.perturbable and known.scannable)


def with_detectors() -> tuple[str, ...]:
    """The benchmarks with an option layout: the peer detectors' tasks."""
    return tuple(name for name, known in SPECS.items() if known.option_layout)


def released() -> tuple[str, ...]:
    """The benchmarks the paper's authors released perturbed sets of."""
    return tuple(name for name, known in SPECS.items() if known.released)
