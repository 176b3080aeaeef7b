"""What a harness must give for the report to read its runs: one `Host` per harness, listed in `hosts.registry`.

A host knows its own output files (which a path is or holds, and which files of a run no report output may
replace) and turns them into the report's typed records (`report.inputs.Loaded`), saying on each which host ran
it and how its answers were matched. The report knows no host; it reads what the registry's hosts load.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a host's module stays light: the command line lists the hosts and their exports
    from lmms_contam.report.inputs import Loaded


@dataclass(frozen=True)
class ReadOptions:
    """How the user asked the runs to be read."""

    # Leaderboard mode: pair a built-in run with a perturbed run made with other prompt or generation settings.
    pair_differing_settings: bool = False


def run_label(model: str, host: str) -> str:
    """A model as a host other than lmms-eval names it, marked with that host: the report's rows stay apart."""
    return f"{model} ({host})"


class ExportRefused(Exception):
    """A set that cannot be exported as asked, with the reason; nothing was published."""


class Exporter(ABC):
    """How a resolved perturbed set becomes a host's own dataset (`lmms-contam export <host>`). Its module imports
    nothing heavy: the command line declares every host's export arguments before any command runs."""

    help: str  # one line, in `lmms-contam export --help`
    description: str

    @abstractmethod
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The export's own arguments."""

    @abstractmethod
    def export(self, args: argparse.Namespace) -> list[str]:
        """Write the export; the lines to print. `ExportRefused` names what stopped it."""


class Host(ABC):
    """A harness whose runs the report reads. Its module imports its readers only when they are used."""

    name: str  # as the report shows it (its host column)
    key: str  # as commands name it (`demo --host`, `export`)
    outputs: str  # its output files, for the error a path of no host's gets
    exporter: Exporter | None = None  # how a set is written as its dataset, where it can be

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
