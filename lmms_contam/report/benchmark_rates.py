"""Contamination rates of the benchmarks themselves, from `lmms-contam scan` and `judge` outputs.

A judge summary is shown only beside the scan it was made from (same benchmark and embedding
recipe); anything else is refused with the file named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lmms_contam.corpus.scan_files import ScanOutputError, read_json_object, read_scan
from lmms_contam.report.inputs import ReportInputError


@dataclass(frozen=True)
class BenchmarkRates:
    benchmark: str
    images: int
    threshold: float
    image_only_rate: float
    sweep: dict[str, float]  # threshold -> image-only rate
    recipe: dict
    judge: dict | None  # the judge summary, when one was made from this scan
    source: str


def load_benchmark_rates(folder: str | Path) -> list[BenchmarkRates]:
    folder = Path(folder)
    summaries = sorted(folder.glob("*.summary.json"))
    if not summaries:
        raise ReportInputError(f"{folder}: no <benchmark>.summary.json (an `lmms-contam scan --out` folder?)")
    found = []
    for path in summaries:
        benchmark = path.name.removesuffix(".summary.json")
        judge_path = folder / f"{benchmark}.judge.json"
        try:
            scan, _ = read_scan(folder, benchmark)
            judge = read_json_object(judge_path) if judge_path.exists() else None
        except ScanOutputError as exc:
            raise ReportInputError(str(exc)) from exc
        if judge is not None and (judge.get("benchmark") != benchmark or judge.get("scan_recipe") != scan["recipe"]):
            raise ReportInputError(
                f"{judge_path}: made from another scan than {path} (benchmark or embedding recipe differs); "
                f"rerun `lmms-contam judge {folder} --benchmark {benchmark}`"
            )
        found.append(
            BenchmarkRates(
                benchmark=benchmark,
                images=scan["images"],
                threshold=scan["threshold"],
                image_only_rate=scan["image_only_rate"],
                sweep=scan.get("rates", {}),
                recipe=scan["recipe"],
                judge=judge,
                source=str(path),
            )
        )
    return found
