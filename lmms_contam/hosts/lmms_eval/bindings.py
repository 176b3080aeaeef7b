"""The registry of lmms-eval bindings: how lmms-eval runs each benchmark (one module each under benchmarks/, or
added by another package), by benchmark name. `lmms-contam tasks generate` writes their task YAMLs from these."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.benchmarks import MODULES
from lmms_contam.hosts.lmms_eval.builtin import BuiltinTask, LmmsEvalBinding
from lmms_contam.listing import add_once
from lmms_contam.registry.base import benchmark_of
from lmms_contam.registry.specs import spec

BINDINGS: dict[str, LmmsEvalBinding] = {benchmark_of(module): module.BINDING for module in MODULES}


def add_binding(benchmark: str, bound: LmmsEvalBinding) -> None:
    """Give lmms-eval tasks to `benchmark`, a benchmark of the registry (of another package, or a test's)."""
    spec(benchmark)
    add_once(BINDINGS, benchmark, bound, f"{benchmark!r} already has an lmms-eval binding")


def binding(benchmark: str) -> LmmsEvalBinding:
    if benchmark not in BINDINGS:
        raise ValueError(f"{benchmark} has no lmms-eval tasks; benchmarks with tasks: {', '.join(BINDINGS)}")
    return BINDINGS[benchmark]


def builtin_task(benchmark: str) -> BuiltinTask:
    """The documents and scoring of a benchmark's perturbation and detector tasks."""
    bound = binding(benchmark)
    return BuiltinTask(
        benchmark=benchmark,
        scorer=bound.scorer,
        image_field=bound.image_field,
        shape_doc=bound.shape_doc,
        image_list=bound.image_list,
    )
