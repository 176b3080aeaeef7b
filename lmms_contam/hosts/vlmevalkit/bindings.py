"""The registry of VLMEvalKit bindings: how VLMEvalKit runs each benchmark's exported sets (one module each under
benchmarks/, or added by another package), or why it cannot, by benchmark name.

Names matter: a dataset name holding "mmbench", "ccbench", "circular" or "mmcr" switches VLMEvalKit's
CircularEval on, so no exported name may hold one.
"""

from __future__ import annotations

from lmms_contam.hosts.vlmevalkit.benchmarks import MODULES
from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding
from lmms_contam.listing import add_once
from lmms_contam.records import CONTAM
from lmms_contam.registry.base import benchmark_of
from lmms_contam.registry.specs import perturbable, spec

# VLMEvalKit evaluates a dataset whose name holds one of these with CircularEval (image_mcq.py).
CIRCULAR_NAMES = ("mmbench", "ccbench", "circular", "mmcr")

BINDINGS: dict[str, VLMEvalKitBinding] = {
    benchmark_of(module): module.BINDING for module in MODULES if hasattr(module, "BINDING")
}
REFUSED: dict[str, str] = {benchmark_of(module): module.REFUSED for module in MODULES if hasattr(module, "REFUSED")}


class NotExportable(ValueError):
    """A benchmark VLMEvalKit cannot score as exported, with the reason."""


def add_binding(benchmark: str, bound: VLMEvalKitBinding) -> None:
    """Export `benchmark`, a benchmark of the registry (of another package, or a test's), to VLMEvalKit."""
    spec(benchmark)
    clash = f"{benchmark!r} already has a VLMEvalKit binding or refusal"
    if benchmark in REFUSED:
        raise ValueError(clash)
    add_once(BINDINGS, benchmark, bound, clash)


def binding(benchmark: str) -> VLMEvalKitBinding:
    if benchmark in REFUSED:
        raise NotExportable(f"{benchmark} cannot be exported to VLMEvalKit: {REFUSED[benchmark]}")
    if benchmark not in BINDINGS:
        known = ", ".join(BINDINGS)
        raise NotExportable(f"{benchmark} has no VLMEvalKit binding; exported benchmarks: {known}")
    return BINDINGS[benchmark]


def dataset_name(benchmark: str, family: str = CONTAM) -> str:
    """`<Name>_contam` for both versions of every item, `<Name>_contam_<family>` for the others."""
    name = f"{binding(benchmark).dataset}_contam" + ("" if family == CONTAM else f"_{family}")
    if any(marker in name.lower() for marker in CIRCULAR_NAMES):
        raise NotExportable(f"{name}: VLMEvalKit would evaluate a dataset of this name with CircularEval")
    return name


def exportable() -> tuple[str, ...]:
    """The benchmarks with perturbed sets that VLMEvalKit runs as exported."""
    return tuple(name for name in perturbable() if name in BINDINGS)


def own_datasets() -> dict[str, str]:
    """VLMEvalKit's own dataset of a benchmark (leaderboard mode) -> the benchmark."""
    return {bound.own_dataset: name for name, bound in BINDINGS.items() if bound.own_dataset}


def own_circular() -> dict[str, str]:
    """VLMEvalKit's own CircularEval dataset of a benchmark (the circular detector) -> the benchmark."""
    return {bound.own_circular: name for name, bound in BINDINGS.items() if bound.own_circular}
