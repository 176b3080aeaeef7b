"""Every peer detector the tasks, the hosts and the report know: add a module beside this one and its
`DETECTOR` here."""

from __future__ import annotations

from collections.abc import Iterable

from lmms_contam.detectors import circular, masked_option, option_shuffle, text_only
from lmms_contam.detectors.base import Detector
from lmms_contam.detectors.signals import DetectorSignal
from lmms_contam.records import ContamRecord

DETECTORS: dict[str, Detector] = {
    detector.name: detector
    for detector in (circular.DETECTOR, option_shuffle.DETECTOR, text_only.DETECTOR, masked_option.DETECTOR)
}


def detector_of(variant: str) -> Detector:
    """The detector a record's variant belongs to."""
    for detector in DETECTORS.values():
        if detector.owns(variant):
            return detector
    raise ValueError(f"variant {variant!r} belongs to no peer detector")


def signal_of(records: Iterable[ContamRecord]) -> DetectorSignal:
    """The signal of the one detector whose records these are."""
    records = list(records)
    found = {detector_of(r.variant).name for r in records}
    if len(found) != 1:
        raise ValueError(f"records of one detector expected, found {sorted(found) or 'none'}")
    return DETECTORS[found.pop()].signal(records)
