"""VLMEvalKit as a host of the report: the judged `<model>_<dataset>_<judge>_result.<xlsx|tsv|json>` of its work
dirs, with the status.json its run keeps beside them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lmms_contam.hosts.base import Host, ReadOptions
from lmms_contam.hosts.vlmevalkit import KEY, NAME, reader, result_files
from lmms_contam.report.inputs import Loaded

HARNESS_FILES = (".xlsx", ".tsv", ".pkl", ".csv")  # its predictions and tables beside the results
STATUS = "status.json"


class VlmEvalKit(Host):
    name = NAME
    key = KEY
    outputs = "a VLMEvalKit work dir (*_result.xlsx, .tsv or .json)"

    def wrote(self, path: Path) -> bool:
        return result_files.is_result_file(path) if path.is_file() else bool(result_files.result_files([path]))

    def run_file(self, path: Path) -> bool:
        """Its results, and what `--reuse` reads again: the predictions and the run's status record."""
        return result_files.is_result_file(path) or path.name == STATUS or path.suffix in HARNESS_FILES

    def run_files_above(self, path: Path) -> list[Path]:
        """The status.json a result is read with, in its folder or the one above (an eval-id folder)."""
        if not result_files.is_result_file(path):
            return []
        return [folder / STATUS for folder in (path.parent, path.parent.parent)]

    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        return reader.load(paths)


HOST = VlmEvalKit()
