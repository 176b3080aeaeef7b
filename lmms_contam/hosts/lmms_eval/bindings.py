"""How lmms-eval runs each benchmark: the built-in task whose prompts and scoring are reused, how a
correctness is read from its output, and the shape of its documents. One `LmmsEvalBinding` per benchmark
of the registry that has lmms-eval tasks; `lmms-contam tasks generate` writes their YAMLs from these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lmms_contam.hosts.lmms_eval import builtin
from lmms_contam.hosts.lmms_eval.builtin import BuiltinScorer, BuiltinTask
from lmms_contam.registry.specs import SPECS


@dataclass(frozen=True)
class LmmsEvalBinding:
    scorer: BuiltinScorer  # the built-in process_results, and how a 0/1 correctness is read from it
    shape_doc: Callable[[dict, str, str], dict]  # a perturbed-set row as the built-in's document
    builtin_yaml: str | None = None  # the built-in task (under lmms_eval/tasks/) whose prompts and scoring are reused
    own_task_yaml: str | None = None  # in lmms-eval's format, under lmms_contam/: a benchmark lmms-eval lacks
    doc_to_target: str | None = None  # where the built-in names a column its dataset does not have
    applied_by_scorer: tuple[str, ...] = ()  # blocks of the built-in task its scorer applies itself, so not carried
    image_field: str = "image"  # the built-in task's image column
    image_list: bool = False  # the column holds a list of images (SEED-Bench's frames; one for image items)
    # The item's original id in a sample line of the built-in task, where its logged output names one (lmms-eval
    # does not log the document): leaderboard mode pairs such a run with the `*_perturbed` task by it.
    logged_id: Callable[[dict], str] | None = None
    # The built-in's aggregation functions (in its scorer's module) that compute from the samples alone, with no
    # judge, file or network: the report recomputes a built-in run's figures with them.
    builtin_aggregations: tuple[str, ...] = ()


MMSTAR_SCORER = BuiltinScorer(
    module="lmms_eval.tasks.mmstar.utils",
    process_results="mmstar_process_results",
    read_correct=lambda _doc, out: int(out["average"]["score"]),
)


def _exact_match(module: str, process_results: str) -> BuiltinScorer:
    return BuiltinScorer(module, process_results, lambda _doc, out: int(out["exact_match"]))


BINDINGS: dict[str, LmmsEvalBinding] = {
    "mmstar": LmmsEvalBinding(
        MMSTAR_SCORER,
        builtin.mmstar_doc,
        builtin_yaml="mmstar/mmstar.yaml",
        logged_id=lambda sample: str(sample["average"]["question_id"]),
        builtin_aggregations=("mmstar_aggregate_results",),
    ),
    "realworldqa": LmmsEvalBinding(
        _exact_match("lmms_eval.tasks.realworldqa.utils", "realworldqa_process_results"),
        builtin.realworldqa_doc,
        builtin_yaml="realworldqa/realworldqa.yaml",
    ),
    "naturalbench": LmmsEvalBinding(
        BuiltinScorer(
            module="lmms_eval.tasks.naturalbench.utils",
            process_results="naturalbench_process_results",
            read_correct=lambda doc, out: int(
                out["naturalbench_G_ACC"]["score"] == builtin.naturalbench_gold_value(doc["Answer"])
            ),
        ),
        builtin.naturalbench_doc,
        builtin_yaml="naturalbench/naturalbench.yaml",
        doc_to_target="Answer",
        image_field="Image",
    ),
    "synthetic": LmmsEvalBinding(MMSTAR_SCORER, builtin.mmstar_doc, own_task_yaml="synthetic/lmms_eval_task.yaml"),
    "seedbench": LmmsEvalBinding(
        BuiltinScorer("lmms_eval.tasks.seedbench.utils", "seed_process_result", builtin.seedbench_correct),
        builtin.seedbench_doc,
        builtin_yaml="seedbench/seedbench.yaml",
        image_list=True,
        logged_id=lambda sample: str(sample["seed_all"]["question_id"]),
        builtin_aggregations=("seed_aggregation_result",),
    ),
    "mmbench": LmmsEvalBinding(
        BuiltinScorer("lmms_eval.tasks.mmbench.en_utils", "mmbench_process_results", builtin.mmbench_correct),
        builtin.mmbench_doc,
        builtin_yaml="mmbench/mmbench_en_dev_static.yaml",
        logged_id=lambda sample: str(sample["gpt_eval_score"]["index"]),
    ),
    "mme": LmmsEvalBinding(
        BuiltinScorer(
            module="lmms_eval.tasks.mme.utils",
            process_results="mme_process_results",
            read_correct=lambda _doc, out: int(next(iter(out.values()))["score"]),
        ),
        builtin.mme_doc,
        builtin_yaml="mme/mme.yaml",
    ),
    # lmms-eval's ai2d scores through a filter and its generic exact match; the scorer does both, so the
    # plugin's tasks report `exact_match,none` (the built-in: `exact_match,flexible-extract`).
    "ai2d": LmmsEvalBinding(
        _exact_match("lmms_contam.hosts.lmms_eval.builtin", "ai2d_process_results"),
        builtin.ai2d_doc,
        builtin_yaml="ai2d/ai2d.yaml",
        applied_by_scorer=("filter_list",),
    ),
    "mmmu": LmmsEvalBinding(
        BuiltinScorer("lmms_eval.tasks.mmmu.utils", "mmmu_process_results", builtin.mmmu_correct, draws=True),
        builtin.mmmu_doc,
        builtin_yaml="mmmu/mmmu_val.yaml",
        image_field="image_1",
        logged_id=lambda sample: str(sample["mmmu_acc"]["id"]),
        builtin_aggregations=("mmmu_aggregate_results",),
    ),
    "scienceqa": LmmsEvalBinding(
        _exact_match("lmms_eval.tasks.scienceqa.utils", "sqa_process_results"),
        builtin.scienceqa_doc,
        builtin_yaml="scienceqa/scienceqa_img.yaml",
    ),
}


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
        stratified=SPECS[benchmark].stratified,
    )
