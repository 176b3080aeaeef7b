"""`process_results` and aggregation functions of the plugin's tasks.

Correctness always comes from the built-in task's own scoring; these functions add the ids that
post-hoc tools join on and, for paired tasks, the statistics from `lmms_contam.stats`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from lmms_contam import stats
from lmms_contam.detectors.signals import (
    CIRCULAR,
    OPTION_SHUFFLE,
    TEXT_ONLY,
    DetectorSignal,
    signal_of,
    versions_by_item,
)
from lmms_contam.records import ContamRecord
from lmms_contam.registry.specs import SPECS, WITH_DETECTORS

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
    """The built-in output and this plugin's per-document record (ids + 0/1 correctness), as logged."""
    builtin_output, correct = SPECS[benchmark].scorer.score(doc, results)
    record = ContamRecord(
        benchmark=benchmark, item_id=doc["contam_item_id"], original_id=doc["contam_original_id"],
        variant=doc["contam_variant"], correct=correct, n_options=doc["contam_n_options"], gold=doc["contam_gold"],
        stratum=doc["contam_stratum"], group=doc["contam_group"], slot=doc["contam_slot"],
        set_manifest=doc.get("contam_set_manifest"), text_only_input=doc.get("contam_text_only_input"),
    )  # fmt: skip
    return builtin_output, record.as_logged()


def _records(logged: list[dict]) -> list[ContamRecord]:
    return [ContamRecord.from_logged(record, "lmms-contam aggregation") for record in logged]


def _single_variant(benchmark: str) -> Callable[[dict, list], dict]:
    def process_results(doc: dict, results: list) -> dict:
        builtin_output, record = _score(benchmark, doc, results)
        if benchmark == "naturalbench":
            # The built-in aggregators assert the full 7600 rows in order; ours group by id.
            builtin_output = dict.fromkeys(NATURALBENCH_METRICS, record)
        return {**builtin_output, "contam_ids": record}

    return process_results


def _paired(benchmark: str, metrics: tuple[str, ...] = PAIRED_METRICS) -> Callable[[dict, list], dict]:
    """Every metric aggregates the same per-document records (statistics need all versions of an item)."""

    def process_results(doc: dict, results: list) -> dict:
        _, record = _score(benchmark, doc, results)
        return {**dict.fromkeys(metrics, record), "contam_ids": record}

    return process_results


mmstar_process_results = _single_variant("mmstar")
realworldqa_process_results = _single_variant("realworldqa")
naturalbench_process_results = _single_variant("naturalbench")
synthetic_process_results = _single_variant("synthetic")
mmstar_paired_results = _paired("mmstar")
realworldqa_paired_results = _paired("realworldqa")
naturalbench_paired_results = _paired("naturalbench")
synthetic_paired_results = _paired("synthetic")

# Peer detector tasks (*_circular, *_option_shuffle, *_text_only): metric names per detector, in the
# order of DETECTOR_FIELDS, which the detector_* aggregations below compute.
DETECTOR_METRICS = {
    CIRCULAR: ("acc_vanilla", "acc_circular", "circular_drop", "circular_p", "n_items", "n_inconsistent"),
    OPTION_SHUFFLE: ("acc_original", "acc_shuffled", "shuffle_delta", "shuffle_p", "n_items", "n_flipped"),
    TEXT_ONLY: ("chance", "acc_text_only", "text_only_excess", "text_only_p", "n_items", "n_right"),
}
DETECTOR_FIELDS = ("reference", "score", "signal", "p_value", "n_items", "n_changed")
EXTRA_METRICS = {CIRCULAR: ("n_excluded",)}  # DetectorSignal fields of one detector only, named alike
detector_results = {
    (benchmark, detector): _paired(benchmark, metrics + EXTRA_METRICS.get(detector, ()))
    for benchmark in WITH_DETECTORS
    for detector, metrics in DETECTOR_METRICS.items()
}
mmstar_circular_results = detector_results["mmstar", CIRCULAR]
mmstar_option_shuffle_results = detector_results["mmstar", OPTION_SHUFFLE]
mmstar_text_only_results = detector_results["mmstar", TEXT_ONLY]
realworldqa_circular_results = detector_results["realworldqa", CIRCULAR]
realworldqa_option_shuffle_results = detector_results["realworldqa", OPTION_SHUFFLE]
realworldqa_text_only_results = detector_results["realworldqa", TEXT_ONLY]
synthetic_circular_results = detector_results["synthetic", CIRCULAR]
synthetic_option_shuffle_results = detector_results["synthetic", OPTION_SHUFFLE]
synthetic_text_only_results = detector_results["synthetic", TEXT_ONLY]


def paired_comparison(logged: list[dict]) -> stats.PairedComparison:
    """Join the two versions of each item; an item seen in only one version is left out, with a warning."""
    complete = versions_by_item(_records(logged), lambda versions: len(versions) == 2)
    items = list(complete)
    strata = [complete[i]["original"].stratum for i in items]
    return stats.compare_paired(
        items,
        [complete[i]["original"].correct for i in items],
        [complete[i]["perturbed"].correct for i in items],
        strata if all(strata) else None,
    )


def detector_signal_of(logged: list[dict]) -> DetectorSignal:
    return signal_of(_records(logged))


def _aggregation(compute: Callable[[list[dict]], object], field: str) -> Callable[[list[dict]], float]:
    """An lmms-eval aggregation reading one field of a statistic computed over all records."""

    def aggregate(records: list[dict]) -> float:
        return float(getattr(compute(records), field))

    aggregate.__name__ = field
    return aggregate


def _paired_statistic(field: str) -> Callable[[list[dict]], float]:
    return _aggregation(paired_comparison, field)


acc_original = _paired_statistic("acc_original")
acc_perturbed = _paired_statistic("acc_perturbed")
delta = _paired_statistic("delta")
delta_ci_low = _paired_statistic("ci_low")
delta_ci_high = _paired_statistic("ci_high")
mcnemar_p = _paired_statistic("mcnemar_p")
n_pairs = _paired_statistic("n_pairs")
# Items right on the original and wrong on the counterfactual: the per-sample signal.
n_flagged = _paired_statistic("right_to_wrong")

detector_reference = _aggregation(detector_signal_of, "reference")
detector_score = _aggregation(detector_signal_of, "score")
detector_signal = _aggregation(detector_signal_of, "signal")
detector_p_value = _aggregation(detector_signal_of, "p_value")
detector_n_items = _aggregation(detector_signal_of, "n_items")
detector_n_changed = _aggregation(detector_signal_of, "n_changed")
detector_n_excluded = _aggregation(detector_signal_of, "n_excluded")


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
