"""Per-item contamination flags from the files `scan` and `judge` write, checked against what they describe.

A flag is only as good as the join behind it: the scan must be of this benchmark, version (the
same eval ids) and threshold, and a judge must come from this very scan. Anything else is refused
with the file named, never joined silently. The statistics at the end read a model's per-item
records (correct, image_only, image_text): the `*_scanned` tasks and the report share them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmms_contam import stats
from lmms_contam.corpus import scan
from lmms_contam.corpus.scan_files import ScanOutputError, read_json_object, read_scan
from lmms_contam.judge import ANSWERABLE, NOT_ANSWERABLE

IMAGE_ONLY, IMAGE_TEXT = "image_only", "image_text"
FLAGGED, CLEAN = "flagged", "clean"
UNSCANNED = "unscanned"  # the item has no image the scan embedded (a skipped or video item)
UNJUDGED = "unjudged"  # the judge failed on it: neither flagged nor clean
NO_JUDGE = "no judge"  # no judge was run on this scan


@dataclass(frozen=True)
class ContaminationFlags:
    benchmark: str
    threshold: float
    scans: str  # the folder the flags were read from
    image_only: dict[str, str]  # scanned id -> FLAGGED | CLEAN
    image_text: dict[str, str] | None  # scanned id -> FLAGGED | CLEAN | UNJUDGED; None: no judge

    def of(self, scanned_id: str) -> tuple[str, str]:
        """(image-only flag, image-text flag) of the item whose image a row shows."""
        if scanned_id not in self.image_only:
            return UNSCANNED, UNSCANNED
        text = NO_JUDGE if self.image_text is None else self.image_text[scanned_id]
        return self.image_only[scanned_id], text


def _judged(scans: Path, benchmark: str, summary: dict, scanned: list[str]) -> dict[str, str] | None:
    """Image-text flags: answerable from a matched caption; items without a captioned match are clean."""
    summary_path, rows_path = scans / f"{benchmark}.judge.json", scans / f"{benchmark}.judge.parquet"
    if not summary_path.is_file():
        return None
    judge = read_json_object(summary_path)
    if judge.get("benchmark") != benchmark or judge.get("scan_recipe") != summary["recipe"]:
        raise ScanOutputError(
            f"{summary_path}: made from another scan (benchmark or embedding recipe differs); "
            f"rerun `lmms-contam judge {scans} --benchmark {benchmark}`"
        )
    if not math.isclose(judge.get("threshold", math.nan), summary["threshold"]):
        raise ScanOutputError(
            f"{summary_path}: judged matches above {judge.get('threshold')}, the scan's threshold is "
            f"{summary['threshold']}; rerun `lmms-contam judge {scans} --benchmark {benchmark}` without --threshold"
        )
    if "judge" not in judge:
        return None  # --prefilter-only: no verdicts
    if judge["judge"].get("complete") is False:
        problems = "; ".join(judge["judge"]["problems"])
        raise ScanOutputError(
            f"{summary_path}: the judge's API calls failed ({problems}); rerun "
            f"`lmms-contam judge {scans} --benchmark {benchmark}` when it works"
        )
    if not rows_path.is_file():
        raise ScanOutputError(f"{rows_path}: missing beside {summary_path}; rerun the judge")
    verdicts = {str(r.original_id): r.judge1_outcome for r in pd.read_parquet(rows_path).itertuples()}
    unknown = sorted(set(verdicts) - set(scanned))
    if unknown:
        raise ScanOutputError(f"{rows_path}: {len(unknown)} id(s) the scan does not have (e.g. {unknown[0]})")
    meaning = {ANSWERABLE: FLAGGED, NOT_ANSWERABLE: CLEAN}
    return {i: meaning.get(verdicts[i], UNJUDGED) if i in verdicts else CLEAN for i in scanned}


def read_flags(scans: str | Path, benchmark: str, threshold: float, eval_ids: list[str]) -> ContaminationFlags:
    """Flags for `eval_ids` (the ids `loaders.scanned_ids` gives for the evaluated rows) at `threshold`."""
    scans = Path(scans)
    summary, matches = read_scan(scans, benchmark)
    summary_path = scans / f"{benchmark}.summary.json"
    if not math.isclose(summary["threshold"], threshold):
        raise ScanOutputError(
            f"{summary_path}: scanned at threshold {summary['threshold']}, but contamination is counted above "
            f"{threshold} here; scan again with --threshold {threshold}, or set LMMS_CONTAM_SCAN_THRESHOLD "
            f"(config: scan_threshold) to {summary['threshold']}"
        )
    if summary.get("eval_ids_sha256") != scan.ids_sha256(eval_ids):
        raise ScanOutputError(
            f"{summary_path}: made on another version of {benchmark} ({summary['images']} items scanned from "
            f"{summary.get('eval_source')}; {len(eval_ids)} items here, with other ids); scan the copy you evaluate"
        )
    scanned = [str(i) for i in matches["original_id"]]
    image_only = {
        i: FLAGGED if int(n) > 0 else CLEAN for i, n in zip(scanned, matches["matches_above_threshold"], strict=True)
    }
    return ContaminationFlags(
        benchmark=benchmark,
        threshold=threshold,
        scans=str(scans),
        image_only=image_only,
        image_text=_judged(scans, benchmark, summary, scanned),
    )


def subset_comparison(records: list[dict], kind: str) -> stats.SubsetComparison:
    """Flagged against clean items for one kind of flag; unscanned and unjudged items sit out."""
    sides = [r for r in records if r[kind] in (FLAGGED, CLEAN)]
    return stats.compare_subsets(
        [r["item_id"] for r in sides], [r["correct"] for r in sides], [r[kind] == FLAGGED for r in sides]
    )


def rate(records: list[dict], kind: str) -> float:
    """Share of the evaluated scanned items flagged; an unjudged item counts in the denominator, as in
    the judge's own rate. NaN when nothing was scanned (or judged)."""
    scanned = [r for r in records if r[kind] not in (UNSCANNED, NO_JUDGE)]
    return sum(r[kind] == FLAGGED for r in scanned) / len(scanned) if scanned else float("nan")
