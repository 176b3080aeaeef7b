"""Every benchmark with a VLMEvalKit module, one each holding its `BINDING`, or `REFUSED` (why VLMEvalKit cannot
score it as exported), named as the benchmark's spec and listed in the order the registry keeps. A benchmark of
another package needs no line here: `lmms_contam.hosts.vlmevalkit.bindings.add_binding`."""

from lmms_contam.hosts.vlmevalkit.benchmarks import (
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
