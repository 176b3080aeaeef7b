"""Each output folder handed to the reader of the host that wrote it: lmms-eval's `*_results.json` beside its
`*_samples_<task>.jsonl`, VLMEvalKit's judged `<model>_<dataset>_<judge>_result.<xlsx|tsv|json>`. A folder
holding both is read by both; the records are merged into one report."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lmms_contam.hosts.lmms_eval import reader as lmms_eval_reader
from lmms_contam.hosts.vlmevalkit import reader as vlmevalkit_reader
from lmms_contam.hosts.vlmevalkit import result_files as vlmevalkit_files
from lmms_contam.report.inputs import Loaded, ReportInputError


def _written_by(path: Path) -> tuple[bool, bool]:
    """(lmms-eval, VLMEvalKit): which hosts' output files the path is or holds."""
    if path.is_file():
        return lmms_eval_reader.is_output_file(path), vlmevalkit_files.is_result_file(path)
    if path.is_dir():
        return any(path.rglob("*_results.json")), bool(vlmevalkit_files.result_files([path]))
    raise ReportInputError(f"{path}: no such file or folder")


HARNESS_FILES = (".xlsx", ".tsv", ".pkl", ".csv")  # VLMEvalKit's predictions and tables beside its results


def _harness_written(path: Path) -> bool:
    """A file a harness wrote into a run's folder: what the readers read, or what the harness needs again
    (VLMEvalKit's predictions, which --reuse reads)."""
    return (
        lmms_eval_reader.is_output_file(path)
        or vlmevalkit_files.is_result_file(path)
        or path.name == "status.json"
        or path.suffix in HARNESS_FILES
    )


def read_files(paths: Iterable[str | Path]) -> set[Path]:
    """Every file of the runs under `paths` (resolved): what no output of the report may replace. A file named
    alone brings its folder's and the folder above's (where lmms-eval keeps its results beside the samples and
    VLMEvalKit its status.json), and every VLMEvalKit result the status.json it is read with, up to two
    folders above it."""
    found = set()
    for path in map(Path, paths):
        folders = [path] if path.is_dir() else [path.parent, path.parent.parent]
        found.add(path.resolve())
        for folder in folders:
            candidates = folder.rglob("*") if folder == path else folder.iterdir()
            found |= {p.resolve() for p in candidates if p.is_file() and _harness_written(p)}
    statuses = {
        (folder / "status.json").resolve()
        for result in found
        if vlmevalkit_files.is_result_file(result)
        for folder in (result.parent, result.parent.parent)
    }
    return found | statuses


def read_runs(paths: Iterable[str | Path], pair_differing_settings: bool = False) -> Loaded:
    """Every run under `paths`, by the host that wrote it. `pair_differing_settings`: leaderboard mode pairs a
    built-in run with a perturbed run made with other prompt or generation settings (else refused)."""
    by_host: dict[bool, list[Path]] = {True: [], False: []}  # lmms-eval's paths, VLMEvalKit's paths
    for path in map(Path, paths):
        lmms_eval, vlmevalkit = _written_by(path)
        if not (lmms_eval or vlmevalkit):
            raise ReportInputError(
                f"{path}: neither an lmms-eval output (*_results.json, *_samples_<task>.jsonl) "
                "nor a VLMEvalKit work dir (*_result.xlsx, .tsv or .json)"
            )
        if lmms_eval:
            by_host[True].append(path)
        if vlmevalkit:
            by_host[False].append(path)
    loaded = Loaded([], [])
    if by_host[True]:
        loaded += lmms_eval_reader.load(by_host[True], pair_differing_settings)
    if by_host[False]:
        loaded += vlmevalkit_reader.load(by_host[False])
    if not (loaded.benchmarks or loaded.detectors or loaded.scanned):
        raise ReportInputError(f"no runs of lmms-contam's tasks or exports under {', '.join(map(str, paths))}")
    return loaded
