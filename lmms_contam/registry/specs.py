"""Every benchmark the project knows, one `BenchmarkSpec` each.

What a benchmark *is*, whichever harness runs it (where its rows are on the hub, how a row becomes an
item, the columns of its perturbed sets, how its questions list their options, how its items group)
lives here and nowhere else: the loaders, the schema, the detectors, the report and the command line all
ask this module. How a harness runs it is that host's binding (hosts/lmms_eval/bindings.py,
hosts/vlmevalkit/bindings.py); `lmms-contam tasks generate` writes its lmms-eval task YAMLs from both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lmms_contam.registry import parsers
from lmms_contam.registry.parsers import Parser, column, column_or_position

INLINE = "inline"  # MMStar: "...\nOptions: A: x, B: y, C: z, D: w"
LINES = "lines"  # RealWorldQA: one "A. x" line per option
COLUMNS = "columns"  # SEED-Bench, MMBench, ScienceQA, AI2D, MMMU: the options are fields of the document


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

    @property
    def scannable(self) -> bool:
        return self.source is not None and self.parser is not None

    @property
    def perturbable(self) -> bool:
        """It has perturbed sets (`*_perturbed`, `*_original`, `*_contam` tasks; VLMEvalKit exports)."""
        return self.columns is not None


MMSTAR_COLUMNS = BenchmarkColumns(extra=("category", "l2_category"), answer_style="letter")
LETTERS = BenchmarkColumns(extra=(), answer_style="letter")

SPECS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec(
            name="mmstar",
            label="MMStar",
            source=Source("Lin-Chen/MMStar", None, "val"),
            parser=Parser(column("index"), parsers.parse_mmstar),
            columns=MMSTAR_COLUMNS,
            option_layout=INLINE,
            stratified=True,
            released=True,
        ),
        BenchmarkSpec(
            name="realworldqa",
            label="RealWorldQA",
            source=Source("lmms-lab-encoder/RealWorldQA", None, "test"),
            parser=Parser(column_or_position("index"), parsers.parse_realworldqa),
            columns=LETTERS,
            option_layout=LINES,
            released=True,
        ),
        BenchmarkSpec(
            name="naturalbench",
            label="NaturalBench",
            source=Source("BaiqiL/NaturalBench-lmms-eval", None, "test"),
            parser=Parser(column("Index"), parsers.parse_naturalbench),
            columns=BenchmarkColumns(extra=("question_type", "group_id", "group_slot"), answer_style="text"),
            group_scheme="naturalbench",
            group_of=parsers.naturalbench_group,
            group_slots=parsers.NATURALBENCH_SLOTS,
        ),
        # The controlled experiment's procedural benchmark (lmms_contam.synthetic): MMStar's layout and scoring.
        BenchmarkSpec(
            name="synthetic", label="synthetic", columns=MMSTAR_COLUMNS, option_layout=INLINE, stratified=True
        ),
        BenchmarkSpec(
            name="seedbench",
            label="SEED-Bench",
            source=Source("lmms-lab-encoder/SEED-Bench", None, "test"),
            parser=Parser(column("question_id"), parsers.parse_seedbench),
            columns=BenchmarkColumns(extra=("question_type_id",), answer_style="letter"),
            option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            name="mmbench",
            label="MMBench",
            source=Source("lmms-lab-encoder/MMBench", "en", "dev"),
            parser=Parser(column("index"), parsers.parse_mmbench, lambda i: str(int(i) % parsers.MMBENCH_COPY_OFFSET)),
            columns=BenchmarkColumns(extra=("category", "l2_category"), answer_style="letter"),
            option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            name="mme",
            label="MME",
            source=Source("lmms-lab-encoder/MME", None, "test"),
            parser=Parser(lambda rows: parsers.occurrence_ids(rows["question_id"]), parsers.parse_mme),
            columns=BenchmarkColumns(extra=("category", "group_id", "group_slot"), answer_style="text"),
            group_scheme="mme",
            group_of=parsers.mme_group,
            group_slots=parsers.MME_SLOTS,
        ),
        BenchmarkSpec(
            name="ai2d",
            label="AI2D",
            source=Source("lmms-lab-encoder/ai2d", None, "test"),
            parser=Parser(column_or_position("index"), parsers.parse_ai2d),
            columns=LETTERS,
            option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            name="mmmu",
            label="MMMU",
            source=Source("lmms-lab-encoder/MMMU", None, "validation"),
            parser=Parser(column("id"), parsers.parse_mmmu),
            columns=LETTERS,
            option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            name="scienceqa",
            label="ScienceQA-IMG",
            source=Source("lmms-lab-encoder/ScienceQA", "ScienceQA-IMG", "test"),
            parser=Parser(column_or_position("index"), parsers.parse_scienceqa),
            columns=BenchmarkColumns(extra=("hint",), answer_style="letter"),
            option_layout=COLUMNS,
        ),
    )
}

SCANNABLE = tuple(name for name, spec in SPECS.items() if spec.scannable)  # scan, judge and `*_scanned`
PERTURBABLE = tuple(name for name, spec in SPECS.items() if spec.perturbable)  # the perturbation tasks
PERTURB_FROM_HUB = tuple(name for name in PERTURBABLE if SPECS[name].scannable)  # `lmms-contam perturb`
WITH_DETECTORS = tuple(name for name, spec in SPECS.items() if spec.option_layout)  # the peer detectors
RELEASED = tuple(name for name, spec in SPECS.items() if spec.released)  # the authors' perturbed sets


def spec(name: str) -> BenchmarkSpec:
    if name not in SPECS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(SPECS))}")
    return SPECS[name]
