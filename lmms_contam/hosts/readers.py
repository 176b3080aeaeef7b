"""Each input path handed to the hosts that wrote it (hosts/registry.py): a folder holding several hosts' runs is
read by each; the records are merged into one report."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lmms_contam.hosts.base import ReadOptions
from lmms_contam.hosts.registry import HOSTS, hosts_of
from lmms_contam.report.inputs import Loaded, ReportInputError


def _run_file(path: Path) -> bool:
    return any(host.run_file(path) for host in HOSTS.values())


def read_files(paths: Iterable[str | Path]) -> set[Path]:
    """Every file of the runs under `paths` (resolved): what no output of the report may replace. A file named
    alone brings its folder's and the folder above's (where lmms-eval keeps its results beside the samples),
    and each host's files a run is read with outside its folder (VLMEvalKit's status.json)."""
    found = set()
    for path in map(Path, paths):
        folders = [path] if path.is_dir() else [path.parent, path.parent.parent]
        found.add(path.resolve())
        for folder in folders:
            candidates = folder.rglob("*") if folder == path else folder.iterdir()
            found |= {p.resolve() for p in candidates if p.is_file() and _run_file(p)}
    above = {extra.resolve() for result in found for host in HOSTS.values() for extra in host.run_files_above(result)}
    return found | above


def read_runs(paths: Iterable[str | Path], options: ReadOptions | None = None) -> Loaded:
    """Every run under `paths`, by the hosts that wrote it."""
    options = options or ReadOptions()
    by_host: dict[str, list[Path]] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise ReportInputError(f"{path}: no such file or folder")
        found = hosts_of(path)
        if not found:
            raise ReportInputError(f"{path}: neither {' nor '.join(host.outputs for host in HOSTS.values())}")
        for host in found:
            by_host.setdefault(host.key, []).append(path)
    loaded = Loaded([], [])
    for key, host_paths in by_host.items():
        loaded += HOSTS[key].load(host_paths, options)
    if not (loaded.benchmarks or loaded.detectors or loaded.scanned):
        raise ReportInputError(f"no runs of lmms-contam's tasks or exports under {', '.join(map(str, paths))}")
    return loaded
