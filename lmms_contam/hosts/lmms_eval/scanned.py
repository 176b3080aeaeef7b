"""The `*_scanned` tasks: a built-in benchmark, scored by its own code, plus contamination flags per item.

The documents are the built-in task's rows, untouched, with three columns added: the item id and
its image-only and image-text flags, joined from the scan folder the user names:
  1. $LMMS_CONTAM_SCANS; 2. `scans:` in the config file; 3. $LMMS_CONTAM_HOME/scans.
Contamination is counted above $LMMS_CONTAM_SCAN_THRESHOLD (config `scan_threshold`), by default
the scan embedder's standard threshold (0.9 for CLIP). The metrics add to the built-in ones: the
rates, accuracy on flagged and on clean items, and their gap with a bootstrap CI and Fisher's test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import datasets
from loguru import logger

from lmms_contam.benchmarks import loaders
from lmms_contam.corpus.scan_files import ScanOutputError, read_scan
from lmms_contam.flags import (
    FLAGGED,
    IMAGE_ONLY,
    IMAGE_TEXT,
    UNJUDGED,
    UNSCANNED,
    ContaminationFlags,
    rate,
    read_flags,
    subset_comparison,
)
from lmms_contam.hosts.lmms_eval.bindings import binding
from lmms_contam.hosts.lmms_eval.scoring import Metric, group_scored_output
from lmms_contam.hosts.lmms_eval.swallowed import log_error_once
from lmms_contam.registry.specs import SPECS
from lmms_contam.schema import SCHEMA_VERSION
from lmms_contam.set_locations import home, lookup

SCANS_ENV, THRESHOLD_ENV = "LMMS_CONTAM_SCANS", "LMMS_CONTAM_SCAN_THRESHOLD"
FLAG_COLUMNS = {IMAGE_ONLY: "contam_image_only", IMAGE_TEXT: "contam_image_text"}
SUBSET_FIELDS = {  # metric suffix -> SubsetComparison field
    "acc_flagged": "acc_flagged",
    "acc_clean": "acc_clean",
    "gap": "gap",
    "gap_ci_low": "ci_low",
    "gap_ci_high": "ci_high",
    "gap_p": "p_value",
    "n_flagged": "n_flagged",
    "n_clean": "n_clean",
}
SCANNED_METRICS = (
    "image_only_rate",
    "image_text_rate",
    *(f"{kind}_{suffix}" for kind in (IMAGE_ONLY, IMAGE_TEXT) for suffix in SUBSET_FIELDS),
    "n_unscanned",
    "n_unjudged",
)
# Their metric_list entries: accuracies and item counts on either side are higher-is-better, as in lmms-eval;
# rates, gaps and p-values, the contamination signals, are not.
SCANNED_METRIC_LIST = tuple(
    Metric(name, name, name.endswith(("acc_flagged", "acc_clean", "n_flagged", "n_clean"))) for name in SCANNED_METRICS
)


def scans_folder() -> tuple[Path, str]:
    """The scan folder and where it was named; the error lists every place looked at."""
    looked: list[str] = []
    found = lookup(SCANS_ENV, "scans", None, looked)
    if found is not None:
        value, via, base = found
        path = Path(value).expanduser()
        path = base / path if base is not None and not path.is_absolute() else path
        if not path.is_dir():
            raise ScanOutputError(f"{via} points to {path}, which is not a folder")
        return path, via
    default = home() / "scans"
    if default.is_dir():
        return default, f"default folder {default}"
    looked.append(f"default folder {default}: does not exist")
    steps = "\n".join(f"  {i}. {line}" for i, line in enumerate(looked, 1))
    raise ScanOutputError(
        f"lmms-contam: no scan folder for the *_scanned tasks. Looked in:\n{steps}\n"
        f"Run `lmms-contam scan --eval <benchmarks> --corpus <corpus> --out <folder>` (and optionally "
        f"`lmms-contam judge <folder> --benchmark <b>`), then set ${SCANS_ENV}=<folder>."
    )


def counting_threshold(scans: Path, benchmark: str) -> float:
    """The user's threshold, else the one the scan counted at (its embedder's standard one unless the
    scan was told otherwise)."""
    found = lookup(THRESHOLD_ENV, "scan_threshold", None, [])
    if found is None:
        summary, _ = read_scan(scans, benchmark)
        return summary["threshold"]
    try:
        return float(found[0])
    except ValueError as exc:
        raise ScanOutputError(f"{found[1]}: {found[0]!r} is not a number") from exc


def join_flags(rows: datasets.Dataset, benchmark: str) -> datasets.Dataset:
    """The rows with their ids and flags added as columns (no image is decoded or rewritten)."""
    scans, via = scans_folder()
    flags = read_flags(scans, benchmark, counting_threshold(scans, benchmark), loaders.scanned_ids(benchmark, rows))
    ids = loaders.original_ids(benchmark, rows)
    scanned_as = SPECS[benchmark].parser.scanned_as
    joined = [flags.of(scanned_as(i)) for i in ids]
    logger.info(f"lmms-contam: {benchmark} contamination flags from {scans} (via {via}); {_counts(flags, joined)}")
    rows = rows.add_column("contam_item_id", ids)
    for position, column in enumerate(FLAG_COLUMNS.values()):
        rows = rows.add_column(column, [pair[position] for pair in joined])
    return rows


def _counts(flags: ContaminationFlags, joined: list[tuple[str, str]]) -> str:
    image_only = sum(pair[0] == FLAGGED for pair in joined)
    text = "no judge" if flags.image_text is None else f"{sum(pair[1] == FLAGGED for pair in joined)} image-text"
    return f"{image_only} image-only, {text} flagged of {len(joined)} rows at threshold {flags.threshold}"


def group_of(benchmark: str, doc: dict) -> dict[str, str]:
    """A group-scored benchmark's group and slot, for the group aggregations (NaturalBench: 4 rows a group)."""
    read = SPECS[benchmark].group_of
    if read is None:
        return {}
    group, slot = read(doc, doc["contam_item_id"])
    return {"group": group, "slot": slot}


def scanned_docs(benchmark: str) -> Callable[[datasets.Dataset], datasets.Dataset]:
    def process_docs(rows: datasets.Dataset) -> datasets.Dataset:
        try:
            return join_flags(rows, benchmark)
        except ScanOutputError as exc:  # lmms-eval swallows it: say it once in the harness's output
            log_error_once(str(exc))
            raise

    process_docs.__name__ = f"{benchmark}_scanned_docs"
    return process_docs


def scanned_results(benchmark: str) -> Callable[[dict, list], dict]:
    scorer = binding(benchmark).scorer

    def process_results(doc: dict, results: list) -> dict:
        builtin_output, correct = scorer.score(doc, results)
        record = {
            "schema_version": SCHEMA_VERSION,
            "benchmark": benchmark,
            "item_id": doc["contam_item_id"],
            "correct": correct,
            IMAGE_ONLY: doc[FLAG_COLUMNS[IMAGE_ONLY]],
            IMAGE_TEXT: doc[FLAG_COLUMNS[IMAGE_TEXT]],
            **group_of(benchmark, doc),
        }
        builtin_output = group_scored_output(benchmark, builtin_output, record, doc)
        return {**builtin_output, **dict.fromkeys(SCANNED_METRICS, record), "contam_ids": record}

    process_results.__name__ = f"{benchmark}_scanned_results"
    return process_results


def _aggregation(name: str, compute: Callable[[list[dict]], float]) -> Callable[[list[dict]], float]:
    """A one-argument function named after its metric (lmms-eval inspects aggregations' signatures)."""

    def aggregate(records: list[dict]) -> float:
        return float(compute(records))

    aggregate.__name__ = name
    return aggregate


def _count(kind: str, value: str) -> Callable[[list[dict]], float]:
    return lambda records: sum(r[kind] == value for r in records)


AGGREGATIONS: dict[str, Callable[[list[dict]], float]] = {
    name: _aggregation(name, compute)
    for name, compute in {
        "image_only_rate": lambda records: rate(records, IMAGE_ONLY),
        "image_text_rate": lambda records: rate(records, IMAGE_TEXT),
        **{
            f"{kind}_{suffix}": (
                lambda records, kind=kind, field=field: getattr(subset_comparison(records, kind), field)
            )
            for kind in (IMAGE_ONLY, IMAGE_TEXT)
            for suffix, field in SUBSET_FIELDS.items()
        },
        "n_unscanned": _count(IMAGE_ONLY, UNSCANNED),
        "n_unjudged": _count(IMAGE_TEXT, UNJUDGED),
    }.items()
}
assert tuple(AGGREGATIONS) == SCANNED_METRICS
