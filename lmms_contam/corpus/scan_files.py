"""A scan's output files (`<benchmark>.summary.json`, `.matches.parquet`), read and checked against
each other: everything that joins flags, or picks a judge's candidates, reads them through here."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa

from lmms_contam.corpus import scan


class ScanOutputError(ValueError):
    """A scan or judge output that cannot be used as it is; the message names the file."""


SUMMARY_FIELDS = ("scan_version", "benchmark", "threshold", "k", "images", "recipe", "image_only_rate")
MATCH_COLUMNS = (
    "original_id",
    "max_similarity",
    "matches_above_threshold",
    "top_ids",
    "top_similarities",
    "top_captions",
    "top_urls",
)


def read_scan(scans: Path, benchmark: str) -> tuple[dict, pd.DataFrame]:
    """A scan's summary and matches, refused with the file named when missing, damaged, of another
    benchmark or version, or when the two do not describe the same images."""
    summary_path, matches_path = scans / f"{benchmark}.summary.json", scans / f"{benchmark}.matches.parquet"
    for path in (summary_path, matches_path):
        if not path.is_file():
            raise ScanOutputError(f"{path}: missing; run `lmms-contam scan --eval {benchmark} --out {scans}` first")
    summary = read_json_object(summary_path)
    missing = [name for name in SUMMARY_FIELDS if name not in summary]
    if missing:
        raise ScanOutputError(f"{summary_path}: lacks {', '.join(missing)} (not a scan summary, or damaged)")
    if summary.get("scan_version") != scan.SCAN_VERSION or summary.get("benchmark") != benchmark:
        raise ScanOutputError(
            f"{summary_path}: a scan of {summary.get('benchmark')!r}, version {summary.get('scan_version')}; "
            f"expected {benchmark!r}, version {scan.SCAN_VERSION}"
        )
    try:
        matches = pd.read_parquet(matches_path)
    except (pa.ArrowException, OSError) as exc:
        raise ScanOutputError(f"{matches_path}: not a readable parquet file ({exc})") from exc
    missing = [name for name in MATCH_COLUMNS if name not in matches.columns]
    if missing or len(matches) != summary["images"]:
        detail = (
            f"lacks column(s) {', '.join(missing)}"
            if missing
            else f"{len(matches)} rows, but {summary_path} counts {summary['images']} images"
        )
        raise ScanOutputError(f"{matches_path}: {detail}; scan again")
    return summary, matches


def read_json_object(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ScanOutputError(f"{path}: not valid JSON (truncated?): {exc}") from exc
    if not isinstance(value, dict):
        raise ScanOutputError(f"{path}: a JSON object was expected")
    return value
