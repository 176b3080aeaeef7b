"""lmms-eval as a host of the report: its `*_results.json` beside its `*_samples_<task>.jsonl`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from lmms_contam.hosts.base import Host, ReadOptions
from lmms_contam.hosts.lmms_eval import KEY, NAME

if TYPE_CHECKING:
    from lmms_contam.report.inputs import Loaded


class LmmsEval(Host):
    name = NAME
    key = KEY
    outputs = "an lmms-eval output (*_results.json, *_samples_<task>.jsonl)"

    def wrote(self, path: Path) -> bool:
        from lmms_contam.hosts.lmms_eval.reader import is_output_file

        return is_output_file(path) if path.is_file() else any(path.rglob("*_results.json"))

    def run_file(self, path: Path) -> bool:
        from lmms_contam.hosts.lmms_eval.reader import is_output_file

        return is_output_file(path)

    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        from lmms_contam.hosts.lmms_eval.reader import load

        return load(paths, options.pair_differing_settings)


HOST = LmmsEval()
