"""lmms-eval as a host of the report: its `*_results.json` beside its `*_samples_<task>.jsonl`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lmms_contam.hosts.base import Host, ReadOptions
from lmms_contam.hosts.lmms_eval import KEY, NAME, reader
from lmms_contam.report.inputs import Loaded


class LmmsEval(Host):
    name = NAME
    key = KEY
    outputs = "an lmms-eval output (*_results.json, *_samples_<task>.jsonl)"

    def wrote(self, path: Path) -> bool:
        return reader.is_output_file(path) if path.is_file() else any(path.rglob("*_results.json"))

    def run_file(self, path: Path) -> bool:
        return reader.is_output_file(path)

    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        return reader.load(paths, options.pair_differing_settings)


HOST = LmmsEval()
