"""The types every benchmark module fills in, kept apart from the modules so that each can import them.

A benchmark is one module under registry/benchmarks/ holding its `SPEC`: what it is, whichever harness runs
it (where its rows are on the hub, how a row becomes an item, the columns of its perturbed sets, how its
questions list their options, how its items group). The loaders, the schema, the detectors, the report and
the command line ask the registry (specs.py) for it; how a harness runs it is that host's binding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from lmms_contam.items import Item, Skipped

if TYPE_CHECKING:
    import datasets

INLINE = "inline"  # MMStar: "...\nOptions: A: x, B: y, C: z, D: w"
LINES = "lines"  # RealWorldQA: one "A. x" line per option
COLUMNS = "columns"  # SEED-Bench, MMBench, ScienceQA, AI2D, MMMU: the options are fields of the document


@dataclass(frozen=True)
class Parser:
    ids: Callable[[datasets.Dataset], list[str]]  # every row's original id, from id columns only
    parse: Callable[[dict, str], Item | Skipped]
    scanned_as: Callable[[str], str] = lambda original_id: original_id  # the item whose image a row shows


def column(name: str) -> Callable[[datasets.Dataset], list[str]]:
    return lambda rows: [str(value) for value in rows[name]]


def column_or_position(name: str) -> Callable[[datasets.Dataset], list[str]]:
    return lambda rows: column(name)(rows) if name in rows.column_names else [str(i) for i in range(len(rows))]


@dataclass(frozen=True)
class Source:
    """A dataset on the hub as lmms-eval's built-in task loads it."""

    hub_id: str
    config: str | None
    split: str


@dataclass(frozen=True)
class BenchmarkColumns:
    """What a benchmark adds to the common columns of a perturbed set, and how its answers are written."""

    extra: tuple[str, ...]
    # "letter": answers are option letters (A = options[0]); "text": answers are option texts.
    answer_style: str


LETTERS = BenchmarkColumns(extra=(), answer_style="letter")
LETTERS_BY_CATEGORY = BenchmarkColumns(extra=("category", "l2_category"), answer_style="letter")


@dataclass(frozen=True)
class BenchmarkSpec:
    """What a benchmark is, whichever harness runs it (each host binds it in its own folder under hosts/)."""

    name: str
    label: str  # as the papers write it
    source: Source | None = None  # where lmms-eval loads it: scan, judge, `*_scanned` and perturb's originals
    parser: Parser | None = None  # a row of `source` as an Item
    columns: BenchmarkColumns | None = None  # its perturbed sets
    option_layout: str | None = None  # how its questions list their options: the option-order detectors
    # Its built-in aggregations need every row in order, or every pair: the plugin's score groups by id instead
    # (the scheme's metrics are in hosts.lmms_eval.scoring.GROUP_SCHEMES), groups read from a hub row and its id.
    group_scheme: str | None = None
    group_of: Callable[[dict, str], tuple[str, str]] | None = None
    group_slots: tuple[str, ...] = ()  # the slots of a group; a set's group_slot column holds only these
    stratified: bool = False  # its accuracy is a macro average over l2_category, so the paired ones are
    released: bool = False  # the paper's authors released perturbed sets of it (lmms-contam fetch mm-perturb)
    # Procedural benchmarks: the best rate at which a model that never saw an item names a hidden wrong option
    # exactly (the masked-option detector's reference by construction); None where no construction bounds it.
    masked_option_chance: float | None = None

    def stratum(self, row: dict) -> str:
        """A set row's stratum, as every host's record carries it: its l2_category where accuracy is averaged over
        them, else none."""
        return row["l2_category"] if self.stratified else ""

    @property
    def scannable(self) -> bool:
        return self.source is not None and self.parser is not None

    @property
    def perturbable(self) -> bool:
        """It has perturbed sets (`*_perturbed`, `*_original`, `*_contam` tasks; VLMEvalKit exports)."""
        return self.columns is not None


def benchmark_of(module: ModuleType) -> str:
    """The benchmark a host's module binds: each is named as its benchmark (hosts/*/benchmarks/<name>.py)."""
    return module.__name__.rpartition(".")[2]
