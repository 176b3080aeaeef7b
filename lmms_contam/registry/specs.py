"""Every benchmark the project knows, one `BenchmarkSpec` each.

What a benchmark *is* (where lmms-eval loads it, how a row becomes an item, which built-in task scores
it, the columns of its perturbed sets, how its questions list their options) lives here and nowhere
else: the loaders, the schema, the task functions, the detectors, the report and the command line all
ask this module. A new entry in SPECS reaches all of them, and `lmms-contam tasks generate` writes its task
YAMLs (lmms_contam/tasks/) and their `!function` targets (lmms_contam/harness/task_functions.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lmms_contam.registry import builtin, parsers
from lmms_contam.registry.builtin import BuiltinScorer, BuiltinTask
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
    name: str
    label: str  # as the papers write it
    lmms_eval_yaml: str | None  # the built-in task (under lmms_eval/tasks/) whose prompts and scoring are reused
    scorer: BuiltinScorer  # its process_results, and how a 0/1 correctness is read from it
    own_task_yaml: str | None = None  # in lmms-eval's format, under lmms_contam/: a benchmark lmms-eval lacks
    doc_to_target: str | None = None  # where the built-in names a column its dataset does not have
    # Its built-in aggregations need every row in order, or every pair: the plugin's score groups by id instead
    # (the scheme's metrics are in harness.scoring.GROUP_SCHEMES), groups read from a hub row and its id.
    group_scheme: str | None = None
    group_of: Callable[[dict, str], tuple[str, str]] | None = None
    group_slots: tuple[str, ...] = ()  # the slots of a group; a set's group_slot column holds only these
    applied_by_scorer: tuple[str, ...] = ()  # blocks of the built-in task its scorer applies itself, so not carried
    image_field: str = "image"  # the built-in task's image column
    image_list: bool = False  # the column holds a list of images (SEED-Bench's frames; one for image items)
    stratified: bool = False  # the built-in's accuracy is a macro average over l2_category, so the paired ones are
    source: Source | None = None  # where lmms-eval loads it: scan, judge, `*_scanned` and perturb's originals
    parser: Parser | None = None  # a row of `source` as an Item
    columns: BenchmarkColumns | None = None  # its perturbed sets: the perturbation tasks
    shape_doc: Callable[[dict, str, str], dict] | None = None  # a perturbed-set row as the built-in's document
    option_layout: str | None = None  # how its questions list their options: the option-order detectors
    released: bool = False  # the paper's authors released perturbed sets of it (lmms-contam fetch mm-perturb)

    @property
    def scannable(self) -> bool:
        return self.source is not None and self.parser is not None

    @property
    def perturbable(self) -> bool:
        """Perturbed sets of it can be scored (`*_perturbed`, `*_original`, `*_contam`)."""
        return self.columns is not None and self.shape_doc is not None

    @property
    def task(self) -> BuiltinTask:
        if self.shape_doc is None:
            raise ValueError(f"{self.name} has no document shape: its perturbed sets cannot be scored")
        return BuiltinTask(self.name, self.scorer, self.image_field, self.shape_doc, self.image_list, self.stratified)


MMSTAR_SCORER = BuiltinScorer("lmms_eval.tasks.mmstar.utils", "mmstar_process_results",
                              lambda _doc, out: int(out["average"]["score"]))  # fmt: skip
MMSTAR_COLUMNS = BenchmarkColumns(extra=("category", "l2_category"), answer_style="letter")

SPECS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec(
            "mmstar", "MMStar", "mmstar/mmstar.yaml", MMSTAR_SCORER,
            source=Source("Lin-Chen/MMStar", None, "val"), parser=Parser(column("index"), parsers.parse_mmstar),
            columns=MMSTAR_COLUMNS, shape_doc=builtin.mmstar_doc, option_layout=INLINE, stratified=True, released=True,
        ),
        BenchmarkSpec(
            "realworldqa", "RealWorldQA", "realworldqa/realworldqa.yaml",
            BuiltinScorer("lmms_eval.tasks.realworldqa.utils", "realworldqa_process_results",
                          lambda _doc, out: int(out["exact_match"])),
            source=Source("lmms-lab-encoder/RealWorldQA", None, "test"),
            parser=Parser(column_or_position("index"), parsers.parse_realworldqa),
            columns=BenchmarkColumns(extra=(), answer_style="letter"), shape_doc=builtin.realworldqa_doc,
            option_layout=LINES, released=True,
        ),
        BenchmarkSpec(
            "naturalbench", "NaturalBench", "naturalbench/naturalbench.yaml",
            BuiltinScorer("lmms_eval.tasks.naturalbench.utils", "naturalbench_process_results",
                          lambda doc, out: int(out["naturalbench_G_ACC"]["score"]
                                               == builtin.naturalbench_gold_value(doc["Answer"]))),
            image_field="Image", doc_to_target="Answer",
            group_scheme="naturalbench", group_of=parsers.naturalbench_group, group_slots=parsers.NATURALBENCH_SLOTS,
            source=Source("BaiqiL/NaturalBench-lmms-eval", None, "test"),
            parser=Parser(column("Index"), parsers.parse_naturalbench),
            columns=BenchmarkColumns(extra=("question_type", "group_id", "group_slot"), answer_style="text"),
            shape_doc=builtin.naturalbench_doc,
        ),
        # The controlled experiment's procedural benchmark (lmms_contam.synthetic): MMStar's layout and scoring.
        BenchmarkSpec("synthetic", "synthetic", None, MMSTAR_SCORER, own_task_yaml="synthetic/lmms_eval_task.yaml",
                      columns=MMSTAR_COLUMNS, shape_doc=builtin.mmstar_doc, option_layout=INLINE, stratified=True),
        BenchmarkSpec(
            "seedbench", "SEED-Bench", "seedbench/seedbench.yaml",
            BuiltinScorer("lmms_eval.tasks.seedbench.utils", "seed_process_result", builtin.seedbench_correct),
            image_list=True, source=Source("lmms-lab-encoder/SEED-Bench", None, "test"),
            parser=Parser(column("question_id"), parsers.parse_seedbench),
            columns=BenchmarkColumns(extra=("question_type_id",), answer_style="letter"),
            shape_doc=builtin.seedbench_doc, option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            "mmbench", "MMBench", "mmbench/mmbench_en_dev_static.yaml",
            BuiltinScorer("lmms_eval.tasks.mmbench.en_utils", "mmbench_process_results", builtin.mmbench_correct),
            source=Source("lmms-lab-encoder/MMBench", "en", "dev"),
            parser=Parser(column("index"), parsers.parse_mmbench,
                          lambda i: str(int(i) % parsers.MMBENCH_COPY_OFFSET)),
            columns=BenchmarkColumns(extra=("category", "l2_category"), answer_style="letter"),
            shape_doc=builtin.mmbench_doc, option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            "mme", "MME", "mme/mme.yaml",
            BuiltinScorer("lmms_eval.tasks.mme.utils", "mme_process_results",
                          lambda _doc, out: int(next(iter(out.values()))["score"])),
            source=Source("lmms-lab-encoder/MME", None, "test"),
            parser=Parser(lambda rows: parsers.occurrence_ids(rows["question_id"]), parsers.parse_mme),
            group_scheme="mme", group_of=parsers.mme_group, group_slots=parsers.MME_SLOTS,
            columns=BenchmarkColumns(extra=("category", "group_id", "group_slot"), answer_style="text"),
            shape_doc=builtin.mme_doc,
        ),
        # lmms-eval's ai2d scores through a filter and its generic exact match; the scorer does both, so the
        # plugin's tasks report `exact_match,none` (the built-in: `exact_match,flexible-extract`).
        BenchmarkSpec(
            "ai2d", "AI2D", "ai2d/ai2d.yaml",
            BuiltinScorer("lmms_contam.registry.builtin", "ai2d_process_results",
                          lambda _doc, out: int(out["exact_match"])),
            applied_by_scorer=("filter_list",), source=Source("lmms-lab-encoder/ai2d", None, "test"),
            parser=Parser(column_or_position("index"), parsers.parse_ai2d),
            columns=BenchmarkColumns(extra=(), answer_style="letter"), shape_doc=builtin.ai2d_doc,
            option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            "mmmu", "MMMU", "mmmu/mmmu_val.yaml",
            BuiltinScorer("lmms_eval.tasks.mmmu.utils", "mmmu_process_results", builtin.mmmu_correct, draws=True),
            image_field="image_1", source=Source("lmms-lab-encoder/MMMU", None, "validation"),
            parser=Parser(column("id"), parsers.parse_mmmu),
            columns=BenchmarkColumns(extra=(), answer_style="letter"), shape_doc=builtin.mmmu_doc,
            option_layout=COLUMNS,
        ),
        BenchmarkSpec(
            "scienceqa", "ScienceQA-IMG", "scienceqa/scienceqa_img.yaml",
            BuiltinScorer("lmms_eval.tasks.scienceqa.utils", "sqa_process_results",
                          lambda _doc, out: int(out["exact_match"])),
            source=Source("lmms-lab-encoder/ScienceQA", "ScienceQA-IMG", "test"),
            parser=Parser(column_or_position("index"), parsers.parse_scienceqa),
            columns=BenchmarkColumns(extra=("hint",), answer_style="letter"), shape_doc=builtin.scienceqa_doc,
            option_layout=COLUMNS,
        ),
    )
}  # fmt: skip

SCANNABLE = tuple(name for name, spec in SPECS.items() if spec.scannable)  # scan, judge and `*_scanned`
PERTURBABLE = tuple(name for name, spec in SPECS.items() if spec.perturbable)  # the perturbation tasks
PERTURB_FROM_HUB = tuple(name for name in PERTURBABLE if SPECS[name].scannable)  # `lmms-contam perturb`
WITH_DETECTORS = tuple(name for name, spec in SPECS.items() if spec.option_layout)  # the peer detectors
RELEASED = tuple(name for name, spec in SPECS.items() if spec.released)  # the authors' perturbed sets


def spec(name: str) -> BenchmarkSpec:
    if name not in SPECS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(SPECS))}")
    return SPECS[name]
