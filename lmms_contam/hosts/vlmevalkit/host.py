"""VLMEvalKit as a host of the report: the judged `<model>_<dataset>_<judge>_result.<xlsx|tsv|json>` of its work
dirs, with the status.json its run keeps beside them; and the export of a set as its custom dataset."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from lmms_contam.hosts.base import Host, ReadOptions
from lmms_contam.hosts.vlmevalkit import KEY, NAME
from lmms_contam.hosts.vlmevalkit.exporter import EXPORTER

if TYPE_CHECKING:
    from lmms_contam.report.inputs import Loaded

HARNESS_FILES = (".xlsx", ".tsv", ".pkl", ".csv")  # its predictions and tables beside the results
STATUS = "status.json"


class VlmEvalKit(Host):
    name = NAME
    key = KEY
    outputs = "a VLMEvalKit work dir (*_result.xlsx, .tsv or .json)"
    exporter = EXPORTER

    def wrote(self, path: Path) -> bool:
        from lmms_contam.hosts.vlmevalkit import result_files

        return result_files.is_result_file(path) if path.is_file() else bool(result_files.result_files([path]))

    def run_file(self, path: Path) -> bool:
        """Its results, and what `--reuse` reads again: the predictions and the run's status record."""
        from lmms_contam.hosts.vlmevalkit.result_files import is_result_file

        return is_result_file(path) or path.name == STATUS or path.suffix in HARNESS_FILES

    def run_files_above(self, path: Path) -> list[Path]:
        """The status.json a result is read with, in its folder or the one above (an eval-id folder)."""
        from lmms_contam.hosts.vlmevalkit.result_files import is_result_file

        if not is_result_file(path):
            return []
        return [folder / STATUS for folder in (path.parent, path.parent.parent)]

    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        from lmms_contam.hosts.vlmevalkit.reader import load

        return load(paths)


HOST = VlmEvalKit()
