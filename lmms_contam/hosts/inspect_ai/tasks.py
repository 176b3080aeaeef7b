"""The plugin's tasks in inspect-ai's registry: `lmms_contam/<benchmark>_<family>` for every benchmark whose items
are multiple-choice questions answered with a letter (the perturbation's families, and each peer detector that
asks for a letter where the benchmark lists its options).

A task reads the set the other hosts' tasks resolve (set_locations: the same environment variables, config file
and verified subset) and asks it with inspect's own `multiple_choice()` solver and `choice()` scorer, as each
host's own prompt and answer matching are used. The set's manifest hash is in every sample's record and in the
task's metadata, so the report opens that set and no other.
"""

from __future__ import annotations

from collections.abc import Callable

import datasets
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice

from lmms_contam import __version__
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.inspect_ai.samples import item_samples
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED
from lmms_contam.registry.base import BenchmarkSpec
from lmms_contam.registry.specs import SPECS
from lmms_contam.schema import IMAGE_COLUMNS
from lmms_contam.set_locations import load_perturbed_set, manifest_sha256, resolve

TASK_METADATA = "lmms_contam"  # the key of the task's own record in the log's eval metadata


def task_families(spec: BenchmarkSpec) -> list[str]:
    """The families inspect can ask of a benchmark: lettered multiple choice only (its solver asks for a letter
    and its scorer matches one; a detector asking for an option's text has no task here)."""
    if spec.columns is None or spec.columns.answer_style != "letter":
        return []
    asked = [name for name, detector in DETECTORS.items() if not detector.scores_reply] if spec.option_layout else []
    return [CONTAM, ORIGINAL, PERTURBED, *asked]


def task_names() -> dict[str, tuple[str, str]]:
    """Every task's name (without the package's namespace) -> (benchmark, family)."""
    return {f"{name}_{family}": (name, family) for name, spec in SPECS.items() for family in task_families(spec)}


def build_task(benchmark: str, family: str, rotate_all: bool = False) -> Task:
    """One task over the resolved set: a sample per version of every item (versions.item_versions)."""
    location = resolve(benchmark)
    rows = load_perturbed_set(benchmark)
    for column in IMAGE_COLUMNS:  # the stored bytes, not decoded pixels
        rows = rows.cast_column(column, datasets.Image(decode=False))
    manifest = manifest_sha256(location)
    samples = [sample for row in rows for sample in item_samples(benchmark, family, row, manifest, rotate_all)]
    return Task(
        dataset=MemoryDataset(samples, name=f"{benchmark}_{family}", location=location.value),
        solver=multiple_choice(),
        scorer=choice(),
        metadata={
            TASK_METADATA: {
                "benchmark": benchmark,
                "family": family,
                "set_manifest": manifest,
                "rotate_all": rotate_all,
                "plugin_version": __version__,
            }
        },
    )


def task_function(benchmark: str, family: str) -> Callable[..., Task]:
    """The function inspect's `@task` registers: CircularEval's takes `-T rotate_all=true` (rotate the items
    whose options name option letters too, which VLMEvalKit leaves out); the others take no parameter."""
    detector = DETECTORS.get(family)
    if detector is not None and detector.leaves_out_items:

        def rotating(rotate_all: bool = False) -> Task:
            return build_task(benchmark, family, rotate_all)

        function = rotating
    else:

        def plain() -> Task:
            return build_task(benchmark, family)

        function = plain
    function.__name__ = f"{benchmark}_{family}"
    function.__doc__ = f"{SPECS[benchmark].label}, {family}: lmms-contam's {family} versions of the resolved set."
    return function
