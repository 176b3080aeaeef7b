"""What the report reads: the scored items of each (model, benchmark) and the runs of the peer detectors and
scanned tasks, as typed records. Each host's reader (lmms_contam/hosts/) fills them from the folders its
harness writes, and says which host ran them and how their answers were matched; the report knows no host.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.records import CONTAM, VARIANTS, ContamRecord


class ReportInputError(ValueError):
    """Input that cannot be reported on as it is."""


def same_text(a: str, b: str) -> bool:
    """The same words in the same order: how two hosts' copies of one question are compared (a harness may
    re-wrap or re-space a text it carries, never change its words)."""
    return a.split() == b.split()


@dataclass(frozen=True)
class ScoredItem(ContamRecord):
    """A logged record with the model's reply."""

    response: str = ""


@dataclass
class ModelBenchmark:
    """Both versions of a benchmark's items as one model answered them."""

    model: str
    benchmark: str
    items: dict[str, dict[str, ScoredItem]] = field(default_factory=lambda: defaultdict(dict))
    sources: dict[str, str] = field(default_factory=dict)  # variant -> file
    host: str = ""  # the harness that ran it, as the report shows it (hosts/: its `Host.name`)
    # How the replies were judged right or wrong: the built-in task's scoring (lmms-eval), or VLMEvalKit's answer
    # matching and the judge it named ("exact_matching", or an LLM that matched the replies its rules could not).
    matching: str = "the built-in task's scoring"
    notes: tuple[str, ...] = ()  # what a reader of the verdict should know about how the runs were made
    # Whether the host's headline accuracy macro-averages the strata the records carry, as lmms-eval's MMStar
    # averages its l2 categories; VLMEvalKit's Overall is a plain mean over the same items.
    averages_strata: bool = True

    @property
    def set_manifest(self) -> str | None:
        """The manifest hash of the set these items were scored on (None for runs that did not record one)."""
        found = {item.set_manifest for versions in self.items.values() for item in versions.values()}
        if len(found) > 1:
            files = ", ".join(self.sources.values())
            raise ReportInputError(
                f"{self.model}, {self.benchmark}: the runs ({files}) scored {len(found)} different perturbed sets; "
                "report each set's runs apart"
            )
        return found.pop() if found else None

    def add_run(self, items: Iterable[ScoredItem], family: str, source: str) -> None:
        """A run's records: both versions (a paired run) or the one version its family names, each item's
        version once."""
        for item in items:
            if item.variant not in VARIANTS or (family != CONTAM and item.variant != family):
                raise ReportInputError(f"{source}: a {item.variant} record in a {family} run")
            if item.variant in self.items[item.item_id]:
                raise ReportInputError(f"{source}: repeats item {item.item_id} ({item.variant})")
            self.items[item.item_id][item.variant] = item
        for variant in VARIANTS if family == CONTAM else (family,):
            self.sources[variant] = source

    def check_pairs(self) -> None:
        """Both versions of every item, or a refusal naming the files and items that lack one."""
        only = {v: sorted(i for i, versions in self.items.items() if set(versions) == {v}) for v in self.sources}
        if any(only.values()):
            detail = "; ".join(
                f"{len(ids)} item(s) only in {self.sources[v]} (e.g. {', '.join(ids[:3])})"
                for v, ids in only.items()
                if ids
            )
            raise ReportInputError(f"{self.model}, {self.benchmark}: the item sets differ: {detail}")


@dataclass(frozen=True)
class DetectorRun:
    """One model's records of one peer detector task on one benchmark."""

    model: str
    benchmark: str
    detector: str
    records: list[ContamRecord]
    source: str
    host: str = ""  # the harness that ran it, as the report shows it (hosts/: its `Host.name`)
    of_the_set: bool = True  # its items are the set's (False: a host's own CircularEval of the whole benchmark)
    averages_strata: bool = True  # as ModelBenchmark's: False where its host's accuracy is a plain mean


@dataclass(frozen=True)
class ScannedRun:
    """One model's per-item records of a `*_scanned` task: correctness and contamination flags."""

    model: str
    benchmark: str
    records: list[dict]
    source: str


@dataclass(frozen=True)
class Loaded:
    benchmarks: list[ModelBenchmark]  # semantic perturbation: both versions of every item
    detectors: list[DetectorRun]
    scanned: list[ScannedRun] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # result files of other datasets, each named with why

    def __add__(self, other: Loaded) -> Loaded:
        return Loaded(
            benchmarks=self.benchmarks + other.benchmarks,
            detectors=self.detectors + other.detectors,
            scanned=self.scanned + other.scanned,
            ignored=self.ignored + other.ignored,
        )


def baseline_runs(loaded: Loaded, source: str, detector: str) -> dict[tuple[str, str], DetectorRun]:
    """Per (detector, benchmark), the reference model's run of `detector` in what was read from `source` (its
    Baseline option): one model, or the reference is ambiguous."""
    option = DETECTORS[detector].baseline.option
    runs = [run for run in loaded.detectors if run.detector == detector]
    if not runs:
        raise ReportInputError(
            f"{option} {source}: no {detector} runs there; run the reference model on the *_{detector} tasks "
            "with --log_samples"
        )
    models = sorted({run.model for run in runs})
    if len(models) > 1:
        raise ReportInputError(
            f"{option} {source}: holds the {detector} runs of {len(models)} models ({', '.join(models)}); "
            "give the reference model's alone"
        )
    return {(detector, run.benchmark): run for run in runs}
