"""Whether the set a benchmark was scored on was verified, from the manifest beside it.

An unverified counterfactual whose image does not show its new answer is failed by a clean model,
so on an unverified set (the authors' unfiltered release, for one) a negative delta may come from
flawed counterfactuals rather than memorisation. The report says which case each verdict is in.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from lmms_contam.schema import PerturbedSetError
from lmms_contam.set_locations import SetLocation, env_var, manifest_path, manifest_sha256, resolve

FLAWED_COUNTERFACTUALS = "a negative delta may come from flawed counterfactuals rather than memorisation"


@dataclass(frozen=True)
class SetStatus:
    benchmark: str
    location: str | None
    verified: bool | None  # None: not known (no manifest with a verification record, or no set here)
    by: str
    kept: int | None = None
    of: int | None = None
    calibration: dict | None = None  # `verify --calibrate`: the judge's measured error rates

    def short(self) -> str:
        if self.verified is None:
            return "unknown"
        return f"verified ({self.kept} of {self.of} kept)" if self.verified else "NOT verified"

    def calibrated(self) -> str:
        """The judge's calibration in a sentence, with the warning when it keeps too many flawed items."""
        c = self.calibration
        if not c:
            return ""
        text = (
            f" Its judge kept {c['keep_flawed']:.1%} of {c['flawed']} flawed and rejected "
            f"{c['reject_good']:.1%} of {c['good']} good procedural counterfactuals (`verify --calibrate`; a "
            "lower bound on its errors)."
        )
        if c.get("above_safe"):
            text += (
                f" WARNING: that keep rate is above the {c['safe_keep_flawed']:.0%} up to which the "
                f"judge-quality study accused no clean model: {FLAWED_COUNTERFACTUALS} it kept."
            )
        return text

    def sentence(self) -> str:
        if self.verified:
            return (
                f"{self.benchmark}: verified by {self.by}; {self.kept} of {self.of} items kept "
                f"({self.location}).{self.calibrated()}"
            )
        if self.verified is False:
            return (
                f"{self.benchmark}: NOT verified ({self.by}): {FLAWED_COUNTERFACTUALS}; run `lmms-contam verify "
                f"{self.benchmark}` ({self.location})."
            )
        return f"{self.benchmark}: verification unknown ({self.by}); {FLAWED_COUNTERFACTUALS} if it was not verified."

    def as_dict(self) -> dict:
        return asdict(self)


def _manifest(location: SetLocation) -> dict | None:
    path = manifest_path(location)
    try:
        return json.loads(path.read_text()) if path else None
    except json.JSONDecodeError:
        return None


def set_status(benchmark: str, scored_manifest: str | None = None) -> SetStatus:
    """The status of the set the tasks resolve for `benchmark` here (nothing is downloaded to find out).
    `scored_manifest`: the manifest hash the runs recorded; a set here with another is refused, since its
    verification record would describe a set that was not scored."""
    try:
        location = resolve(benchmark, fetch=False)
    except PerturbedSetError:
        return SetStatus(
            benchmark=benchmark,
            location=None,
            verified=None,
            by="no set resolves on this machine, so the scored records were not checked against it either",
        )
    here = manifest_sha256(location)
    if scored_manifest is not None and here != scored_manifest:
        found = f"manifest SHA-256 {here[:12]}" if here else "no manifest"
        raise PerturbedSetError(
            f"{benchmark}: the runs scored the set whose manifest has SHA-256 {scored_manifest[:12]}, but the set "
            f"that resolves here, {location.value} (via {location.found_via}), has {found}; point "
            f"{env_var(benchmark)} at the set that was scored"
        )
    record = (_manifest(location) or {}).get("verification")
    if not isinstance(record, dict) or not isinstance(record.get("verified"), bool):
        return SetStatus(
            benchmark=benchmark, location=location.value, verified=None, by="no verification record beside the set"
        )
    calibration = record.get("calibration") if isinstance(record.get("calibration"), dict) else None
    return SetStatus(
        benchmark=benchmark,
        location=location.value,
        verified=record["verified"],
        by=str(record.get("by", "")),
        kept=record.get("kept"),
        of=record.get("of"),
        calibration=calibration,
    )
