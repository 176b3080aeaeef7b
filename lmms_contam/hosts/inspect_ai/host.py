"""inspect-ai as a host of the report: the logs (.eval, or .json named by time) of the plugin's tasks."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from lmms_contam.hosts.base import Host, ReadOptions
from lmms_contam.hosts.inspect_ai import KEY, NAME
from lmms_contam.hosts.inspect_ai.log_files import is_log_file, log_files

if TYPE_CHECKING:
    from lmms_contam.report.inputs import Loaded


class InspectAI(Host):
    name = NAME
    key = KEY
    outputs = "an inspect-ai log folder (*.eval, or <time>_*.json)"

    def wrote(self, path: Path) -> bool:
        return is_log_file(path) if path.is_file() else bool(log_files([path]))

    def run_file(self, path: Path) -> bool:
        return is_log_file(path)

    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        from lmms_contam.report.inputs import ReportInputError

        try:
            from lmms_contam.hosts.inspect_ai.reader import load
        except ImportError as exc:  # its logs are read with inspect's own reader (an .eval file is zstd-compressed)
            listed = ", ".join(map(str, paths))
            raise ReportInputError(
                f"{listed}: inspect-ai logs; reading them needs inspect-ai (Python 3.11+): "
                f"pip install 'lmms-contam[inspect]' ({exc})"
            ) from exc
        return load(paths)


HOST = InspectAI()
