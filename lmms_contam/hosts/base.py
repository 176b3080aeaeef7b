"""What a harness must give for the report to read its runs: one `Host` per harness, listed in `hosts.registry`.

A host knows its own output files (which a path is or holds, and which files of a run no report output may
replace) and turns them into the report's typed records (`report.inputs.Loaded`), saying on each which host ran
it and how its answers were matched. The report knows no host; it reads what the registry's hosts load.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lmms_contam.report.inputs import Loaded


@dataclass(frozen=True)
class ReadOptions:
    """How the user asked the runs to be read."""

    # Leaderboard mode: pair a built-in run with a perturbed run made with other prompt or generation settings.
    pair_differing_settings: bool = False


class Host(ABC):
    """A harness whose runs the report reads."""

    name: str  # as the report shows it (its host column)
    key: str  # as commands name it (`demo --host`)
    outputs: str  # its output files, for the error a path of no host's gets

    @abstractmethod
    def wrote(self, path: Path) -> bool:
        """Whether `path` is one of this host's output files, or a folder holding some."""

    @abstractmethod
    def run_file(self, path: Path) -> bool:
        """Whether `path` is a file this host writes into a run's folder (read, or needed again by the harness):
        no output of the report may replace it."""

    def run_files_above(self, path: Path) -> list[Path]:
        """Files of the run that `path` (one of its output files) is read with, outside its folder."""
        return []

    @abstractmethod
    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        """Every run under `paths` as the report's records; `ReportInputError` names what cannot be read."""
