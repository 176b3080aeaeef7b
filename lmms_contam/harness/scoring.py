"""`process_results` and aggregation functions of the plugin's tasks.

Correctness always comes from the built-in task's own scoring; these functions add the ids that
post-hoc tools join on and, for paired tasks, the statistics from `lmms_contam.stats`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from loguru import logger

from lmms_contam import stats
from lmms_contam.harness.builtin import BUILTIN_TASKS
from lmms_contam.schema import SCHEMA_VERSION

PAIRED_METRICS = (
    "acc_original",
    "acc_perturbed",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "mcnemar_p",
    "n_pairs",
    "n_flagged",
)
NATURALBENCH_METRICS = ("naturalbench_ACC", "naturalbench_Q_ACC", "naturalbench_I_ACC", "naturalbench_G_ACC")


def _score(benchmark: str, doc: dict, results: list) -> tuple[dict, dict]:
    """The built-in output and this plugin's per-document record (ids + 0/1 correctness)."""
    task = BUILTIN_TASKS[benchmark]
    builtin_output = task.builtin_process_results()(doc, results)
    record = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": benchmark,
        "item_id": doc["contam_item_id"],
        "original_id": doc["contam_original_id"],
        "variant": doc["contam_variant"],
        "gold": doc["contam_gold"],
        "correct": task.read_correct(doc, builtin_output),
        "stratum": doc["contam_stratum"],
        "group": doc["contam_group"],
        "slot": doc["contam_slot"],
    }
    return builtin_output, record


def _single_variant(benchmark: str) -> Callable[[dict, list], dict]:
    def process_results(doc: dict, results: list) -> dict:
        builtin_output, record = _score(benchmark, doc, results)
        if benchmark == "naturalbench":
            # The built-in aggregators assert the full 7600 rows in order; ours group by id.
            builtin_output = dict.fromkeys(NATURALBENCH_METRICS, record)
        return {**builtin_output, "contam_ids": record}

    return process_results


def _paired(benchmark: str) -> Callable[[dict, list], dict]:
    def process_results(doc: dict, results: list) -> dict:
        _, record = _score(benchmark, doc, results)
        return {**dict.fromkeys(PAIRED_METRICS, record), "contam_ids": record}

    return process_results


mmstar_process_results = _single_variant("mmstar")
realworldqa_process_results = _single_variant("realworldqa")
naturalbench_process_results = _single_variant("naturalbench")
synthetic_process_results = _single_variant("synthetic")
mmstar_paired_results = _paired("mmstar")
realworldqa_paired_results = _paired("realworldqa")
naturalbench_paired_results = _paired("naturalbench")
synthetic_paired_results = _paired("synthetic")


def paired_comparison(records: list[dict], with_ci: bool = True) -> stats.PairedComparison:
    """Join the two versions of each item; an item seen in only one version is left out, with a warning."""
    by_item: dict[str, dict[str, dict]] = defaultdict(dict)
    for record in records:
        by_item[record["item_id"]][record["variant"]] = record
    complete = {item: versions for item, versions in by_item.items() if len(versions) == 2}
    if len(complete) < len(by_item):
        logger.warning(
            f"lmms-contam: {len(by_item) - len(complete)} item(s) were scored in one version only "
            f"(--limit or a partial run); paired metrics use the {len(complete)} complete pair(s)"
        )
    items = sorted(complete)
    strata = [complete[i]["original"]["stratum"] for i in items]
    return stats.compare_paired(
        items,
        [complete[i]["original"]["correct"] for i in items],
        [complete[i]["perturbed"]["correct"] for i in items],
        strata if all(strata) else None,
        with_ci=with_ci,
    )


def _paired_statistic(field: str) -> Callable[[list[dict]], float]:
    # Each metric aggregates on its own; only the two CI bounds pay for the bootstrap.
    needs_ci = field in ("ci_low", "ci_high")

    def aggregate(records: list[dict]) -> float:
        return float(getattr(paired_comparison(records, with_ci=needs_ci), field))

    aggregate.__name__ = field
    return aggregate


acc_original = _paired_statistic("acc_original")
acc_perturbed = _paired_statistic("acc_perturbed")
delta = _paired_statistic("delta")
delta_ci_low = _paired_statistic("ci_low")
delta_ci_high = _paired_statistic("ci_high")
mcnemar_p = _paired_statistic("mcnemar_p")
n_pairs = _paired_statistic("n_pairs")
# Items right on the original and wrong on the counterfactual: the per-sample signal.
n_flagged = _paired_statistic("right_to_wrong")


def _naturalbench_score(metric: str) -> Callable[[list[dict]], float]:
    def aggregate(records: list[dict]) -> float:
        by_group: dict[str, dict[str, int]] = defaultdict(dict)
        for record in records:
            by_group[record["group"]][record["slot"]] = record["correct"]
        return stats.group_accuracies(by_group)[metric]

    return aggregate


naturalbench_acc = _naturalbench_score("Acc")
naturalbench_q_acc = _naturalbench_score("Q_Acc")
naturalbench_i_acc = _naturalbench_score("I_Acc")
naturalbench_g_acc = _naturalbench_score("G_Acc")
