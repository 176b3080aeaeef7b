"""`process_results` and aggregation functions of the plugin's tasks.

Correctness always comes from the built-in task's own scoring; these functions add the ids that
post-hoc tools join on and, for paired tasks, the statistics from `lmms_contam.stats`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from lmms_contam import stats
from lmms_contam.detectors.base import Detector
from lmms_contam.detectors.registry import DETECTORS, signal_of
from lmms_contam.detectors.signals import DETECTOR_FIELDS, DetectorSignal, versions_by_item
from lmms_contam.hosts.lmms_eval.bindings import binding
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED, ContamRecord
from lmms_contam.registry.specs import SPECS


@dataclass(frozen=True)
class Metric:
    """One entry of a task's metric_list; `aggregation` is a key of AGGREGATIONS (here or in scanned.py)."""

    name: str
    aggregation: str
    higher_is_better: bool


PAIRED_METRICS = (  # the *_contam tasks': every one aggregates the same per-document records
    Metric("acc_original", "acc_original", True),
    Metric("acc_perturbed", "acc_perturbed", True),
    Metric("delta", "delta", True),
    Metric("delta_ci_low", "delta_ci_low", True),
    Metric("delta_ci_high", "delta_ci_high", True),
    Metric("mcnemar_p", "mcnemar_p", False),
    Metric("n_pairs", "n_pairs", True),
    Metric("n_flagged", "n_flagged", False),
)


# The *_original and *_perturbed tasks': the built-in metrics, and the plain accuracy over the same records, which
# the report recomputes from the samples file to check that it belongs to the run.
SINGLE_METRICS = (Metric("contam_acc", "contam_acc", True),)


@dataclass(frozen=True)
class GroupScheme:
    """The scores of a benchmark whose built-in aggregations need every row in order or every pair (its
    spec's group_scheme): the same scores computed by group id, so subsets, --limit and sets that kept one
    question of a pair work. Each record goes to every metric, or (`by_builtin_key`) to those the built-in
    output names for its document (MME: perception or cognition, by category)."""

    metrics: tuple[Metric, ...]
    by_builtin_key: bool = False


GROUP_SCHEMES = {
    "naturalbench": GroupScheme(
        (
            Metric("naturalbench_G_ACC", "group_g_acc", True),
            Metric("naturalbench_Q_ACC", "group_q_acc", True),
            Metric("naturalbench_I_ACC", "group_i_acc", True),
            Metric("naturalbench_ACC", "group_acc", True),
        )
    ),
    "mme": GroupScheme(
        (Metric("mme_perception_score", "pair_score", True), Metric("mme_cognition_score", "pair_score", True)),
        by_builtin_key=True,
    ),
}
GROUP_SCORES = {"group_g_acc": "G_Acc", "group_q_acc": "Q_Acc", "group_i_acc": "I_Acc", "group_acc": "Acc"}


def detector_metrics(detector: Detector) -> tuple[Metric, ...]:
    """A peer detector task's (*_circular, *_option_shuffle, ...): one metric per DetectorSignal field, named by
    the detector."""
    fields = DETECTOR_FIELDS[: len(detector.metrics)]
    return tuple(
        Metric(name, f"detector_{field}", higher)
        for (name, higher), field in zip(detector.metrics, fields, strict=True)
    )


def task_metrics(family: str) -> tuple[Metric, ...]:
    """The plugin's own metrics of a task family (a single-variant task also logs the built-in's)."""
    if family in (ORIGINAL, PERTURBED):
        return SINGLE_METRICS
    return PAIRED_METRICS if family == CONTAM else detector_metrics(DETECTORS[family])


def _score(benchmark: str, doc: dict, results: list, detector: Detector | None = None) -> tuple[dict, dict]:
    """The built-in output and this plugin's per-document record (ids + 0/1 correctness), as logged; a detector
    that scores replies itself (a text answer) leaves the built-in out."""
    if detector and detector.scores_reply:
        builtin_output, correct = {}, detector.scores_reply(str(results[0]) if results else "", doc["contam_gold"])
    else:
        builtin_output, correct = binding(benchmark).scorer.score(doc, results)
    record = ContamRecord(
        benchmark=benchmark,
        item_id=doc["contam_item_id"],
        original_id=doc["contam_original_id"],
        variant=doc["contam_variant"],
        correct=correct,
        n_options=doc["contam_n_options"],
        gold=doc["contam_gold"],
        original_gold=doc["contam_original_answer"],
        stratum=doc["contam_stratum"],
        group=doc["contam_group"],
        slot=doc["contam_slot"],
        set_manifest=doc.get("contam_set_manifest"),
        text_only_input=doc.get("contam_text_only_input"),
    )
    return builtin_output, record.as_logged()


def _records(logged: list[dict]) -> list[ContamRecord]:
    return [ContamRecord.from_logged(record, "lmms-contam aggregation") for record in logged]


def group_scored_output(benchmark: str, builtin_output: dict, record: dict, doc: dict) -> dict:
    """The built-in output, or for a benchmark scored by group its group metrics, given `record` and the
    document's category, which the group aggregations below read."""
    scheme_name = SPECS[benchmark].group_scheme
    if scheme_name is None:
        return builtin_output
    scheme = GROUP_SCHEMES[scheme_name]
    names = list(builtin_output) if scheme.by_builtin_key else [m.name for m in scheme.metrics]
    return dict.fromkeys(names, {**record, "category": doc.get("category", "")})


def _single_variant(benchmark: str) -> Callable[[dict, list], dict]:
    def process_results(doc: dict, results: list) -> dict:
        builtin_output, record = _score(benchmark, doc, results)
        return {
            **group_scored_output(benchmark, builtin_output, record, doc),
            **dict.fromkeys((m.name for m in SINGLE_METRICS), record),
            "contam_ids": record,
        }

    return process_results


def _paired(
    benchmark: str, metrics: tuple[Metric, ...], detector: Detector | None = None
) -> Callable[[dict, list], dict]:
    """Every metric aggregates the same per-document records (statistics need all versions of an item)."""

    def process_results(doc: dict, results: list) -> dict:
        _, record = _score(benchmark, doc, results, detector)
        return {**dict.fromkeys((m.name for m in metrics), record), "contam_ids": record}

    return process_results


def task_results(benchmark: str, family: str) -> Callable[[dict, list], dict]:
    """The `process_results` of one of a benchmark's perturbation or detector tasks."""
    if family in (ORIGINAL, PERTURBED):
        return _single_variant(benchmark)
    return _paired(benchmark, task_metrics(family), DETECTORS.get(family))


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


def _group_score(metric: str) -> Callable[[list[dict]], float]:
    def aggregate(records: list[dict]) -> float:
        by_group: dict[str, dict[str, int]] = defaultdict(dict)
        for record in records:
            by_group[record["group"]][record["slot"]] = record["correct"]
        return stats.group_accuracies(by_group)[metric]

    aggregate.__name__ = metric
    return aggregate


def contam_accuracy(records: list[dict]) -> float:
    """Plain accuracy over the documents (not the built-in's macro average): one figure every task can log."""
    return stats.accuracy([int(record["correct"]) for record in records])


def pair_score(records: list[dict]) -> float:
    """MME's score as its built-in computes it, by group id: per category, the mean over its image pairs of
    accuracy plus accuracy+ (both questions right), in percent, summed over the categories. A pair with one
    question scored is left out; NaN when no pair is whole (the built-in asserts instead)."""
    by_category: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for record in records:
        by_category[record["category"]][record["group"]][record["slot"]] = record["correct"]
    scores = []
    for pairs in by_category.values():
        whole = [list(slots.values()) for slots in pairs.values() if len(slots) == 2]
        if whole:
            scores.append(sum(100 * sum(pair) / 2 + 100 * all(pair) for pair in whole) / len(whole))
    return float(sum(scores)) if scores else float("nan")


# The aggregations the metric tables above name; lmms_contam/hosts/lmms_eval/task_functions.py exposes each by name.
AGGREGATIONS: dict[str, Callable[[list[dict]], float]] = {
    **{
        name: _aggregation(paired_comparison, field)
        for name, field in (
            ("acc_original", "acc_original"),
            ("acc_perturbed", "acc_perturbed"),
            ("delta", "delta"),
            ("delta_ci_low", "ci_low"),
            ("delta_ci_high", "ci_high"),
            ("mcnemar_p", "mcnemar_p"),
            ("n_pairs", "n_pairs"),
            ("n_flagged", "right_to_wrong"),  # right on the original, wrong on the counterfactual: the per-item signal
        )
    },
    **{f"detector_{field}": _aggregation(detector_signal_of, field) for field in DETECTOR_FIELDS},
    "contam_acc": contam_accuracy,
    **{key: _group_score(score) for key, score in GROUP_SCORES.items()},
    "pair_score": pair_score,
}
