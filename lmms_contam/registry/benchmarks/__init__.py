"""Every benchmark the project knows, one module each holding its `SPEC`, listed in the order the registry keeps
(task files, tables and command-line choices follow it). A benchmark of another package needs no line here:
`lmms_contam.registry.specs.add_benchmark`."""

from lmms_contam.registry.benchmarks import (
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
