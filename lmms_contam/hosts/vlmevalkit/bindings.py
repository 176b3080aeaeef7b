"""How VLMEvalKit runs each benchmark's exported sets.

VLMEvalKit has no plugin registry: a TSV in its data folder whose name it does not know becomes a custom
multiple-choice dataset (question, option columns A, B, ..., answer, image), scored by its own prompt,
model classes and answer matching. Names matter: a name holding "mmbench", "ccbench", "circular" or "mmcr"
switches its CircularEval on, and many model classes pick their prompt by the benchmark's name in the
dataset's; the exported names carry the benchmark's VLMEvalKit name where that is safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmms_contam.records import CONTAM
from lmms_contam.registry.specs import PERTURBABLE

# VLMEvalKit evaluates a dataset whose name holds one of these with CircularEval (image_mcq.py).
CIRCULAR_NAMES = ("mmbench", "ccbench", "circular", "mmcr")


@dataclass(frozen=True)
class VLMEvalKitBinding:
    dataset: str  # the exported datasets' names start with it: the benchmark as VLMEvalKit names it, where safe
    categories: tuple[tuple[str, str], ...] = ()  # (set column, TSV column) its accuracy table groups by
    hint: str | None = None  # the set column VLMEvalKit shows as "Hint:" before the question
    # VLMEvalKit's own dataset of the benchmark, where its `index` is the item's original id (the paper authors'
    # released TSVs are joined on it): leaderboard mode pairs a run of it with a run of the perturbed export.
    own_dataset: str | None = None
    # VLMEvalKit's own dataset of the benchmark that it evaluates with CircularEval: its circular result is the
    # report's circular detector (with PRINT_VANILLA=1, which adds each item's hit in the original order).
    own_circular: str | None = None


CATEGORIES = (("category", "category"), ("l2_category", "l2-category"))

BINDINGS: dict[str, VLMEvalKitBinding] = {
    "mmstar": VLMEvalKitBinding("MMStar", categories=CATEGORIES, own_dataset="MMStar"),
    "realworldqa": VLMEvalKitBinding("RealWorldQA", own_dataset="RealWorldQA"),
    "synthetic": VLMEvalKitBinding("Synthetic", categories=CATEGORIES),
    "seedbench": VLMEvalKitBinding("SEEDBench_IMG"),
    # Not "MMBench": a name holding it switches VLMEvalKit's CircularEval on, which the export's two versions
    # of an item would break. VLMEvalKit's own MMBench run is CircularEval already.
    "mmbench": VLMEvalKitBinding("MMB_DEV_EN", categories=CATEGORIES, own_circular="MMBench_DEV_EN"),
    "ai2d": VLMEvalKitBinding("AI2D_TEST"),
    "mmmu": VLMEvalKitBinding("MMMU_DEV_VAL"),
    "scienceqa": VLMEvalKitBinding("ScienceQA_TEST", hint="hint"),
}

YES_NO = (
    "VLMEvalKit scores yes/no questions only for the datasets it knows by name (it would replace a TSV under such "
    "a name with its own download), and reads a TSV of its own without option columns as free-form VQA"
)
REFUSED = {
    "mme": f"MME asks yes/no questions: {YES_NO}",
    "naturalbench": f"NaturalBench's questions are yes/no or two-way, scored by group: {YES_NO}, and its own "
    "NaturalBench evaluation asserts all 7,600 rows",
}


class NotExportable(ValueError):
    """A benchmark VLMEvalKit cannot score as exported, with the reason."""


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


EXPORTABLE = tuple(name for name in PERTURBABLE if name in BINDINGS)
OWN_DATASETS = {bound.own_dataset: name for name, bound in BINDINGS.items() if bound.own_dataset}
OWN_CIRCULAR = {bound.own_circular: name for name, bound in BINDINGS.items() if bound.own_circular}
