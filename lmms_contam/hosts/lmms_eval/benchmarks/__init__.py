"""Every benchmark lmms-eval runs, one module each holding its `BINDING` (named as the benchmark's spec), listed in
the order the registry keeps. A benchmark of another package needs no line here:
`lmms_contam.hosts.lmms_eval.bindings.add_binding`."""

from lmms_contam.hosts.lmms_eval.benchmarks import (
    ai2d,
    mmbench,
    mme,
    mmmu,
    mmstar,
    naturalbench,
    realworldqa,
    scienceqa,
    seedbench,
    synthetic,
    synthetic_varied,
)

MODULES = (
    mmstar,
    realworldqa,
    naturalbench,
    synthetic,
    synthetic_varied,
    seedbench,
    mmbench,
    mme,
    ai2d,
    mmmu,
    scienceqa,
)
