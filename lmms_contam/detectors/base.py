"""What a peer detector is: the versions of an item it asks and how their answers become its signal.

One `Detector` per module in this folder, collected in `registry.DETECTORS`; the task families, the metrics
each task reports, the task files' descriptions and the report's columns are all read from it, so a new
detector is one module and one line in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lmms_contam.detectors.signals import DetectorSignal
from lmms_contam.records import ContamRecord

Order = tuple[int, ...]  # which of the item's options each position shows


@dataclass(frozen=True)
class AskedItem:
    """The original version of an item, as a detector sees it."""

    item_id: str
    options: tuple[str, ...]
    gold: int  # the index of the gold option
    rotate_all: bool = False  # the run asks CircularEval to rotate the items it would otherwise leave out


@dataclass(frozen=True)
class Baseline:
    """Another model's run of a detector's versions as its reference, in place of its own (MMStar's multi-modal
    leakage: a base LLM's text-only run; masked-option guessing and CircularEval: a clean reference model's run)."""

    option: str  # the report's option naming that run (commands/reporting.py spells it, with its help)
    # The signal given (records, the other run's records, that model's name).
    signal: Callable[[Iterable[ContamRecord], Iterable[ContamRecord], str], DetectorSignal]
    default: str = ""  # what the cell says it is measured against without that run ("chance"), if anything


@dataclass(frozen=True, kw_only=True)
class Detector:
    name: str  # its task family: lmms-eval tasks <benchmark>_<name>
    label: str  # as the report's columns name it
    description: str  # what it compares, for the report
    about: str  # the task files' description; {label} is the benchmark's
    # Its lmms-eval metrics, (name, higher is better), in signals.DETECTOR_FIELDS order (it may stop early).
    metrics: tuple[tuple[str, bool], ...]
    # The versions of an item it asks: {variant: order of the options}; None asks the item as it is written
    # (an order, even the identity, rewrites the question's list of options as every reordered version's).
    orders: Callable[[AskedItem], dict[str, Order | None]]
    owns: Callable[[str], bool]  # whether a record's variant is one of its versions
    # Its signal from the records; the keyword `averages_strata` says whether the host's accuracies are macro
    # averages over the records' strata (lmms-eval's MMStar) or plain means (VLMEvalKit's Overall).
    signal: Callable[..., DetectorSignal]
    withholds_image: bool = False  # its versions are asked without the image
    leaves_out_items: bool = False  # it asks some items once unless the run's rotate-all switch is on (AskedItem)
    baseline: Baseline | None = None  # another model's run as its reference, where the user gives one
    # It hides one wrong option (the index `hides` gives) and asks for its text: its version's gold is that
    # text, `instruction` replaces the host's request for a letter, and `scores_reply(reply, gold)` gives the
    # 0/1 correctness in place of the host's letter matching.
    hides: Callable[[AskedItem], int] | None = None
    instruction: str = ""
    scores_reply: Callable[[str, str], int] | None = None
