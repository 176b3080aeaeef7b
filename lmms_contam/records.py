"""The record every perturbation and peer-detector document logs (`contam_ids` in the sample line).

One type from the task that writes it to the report and the detectors that read it: the harness stores
it as a plain mapping (the sample files are JSON), and every reader turns it back into a checked record,
so a missing field or a foreign schema is refused where it is read, naming the file and line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lmms_contam.schema import SCHEMA_VERSION

REQUIRED = ("benchmark", "item_id", "original_id", "variant", "correct", "n_options")
VARIANTS = ("original", "perturbed")  # the two versions of an item in a perturbed set
ORIGINAL, PERTURBED = VARIANTS
CONTAM = "contam"  # both versions, paired: the *_contam tasks and the VLMEvalKit export's default family


@dataclass(frozen=True)
class ContamRecord:
    benchmark: str
    item_id: str
    original_id: str
    variant: str  # original | perturbed, or a peer detector's version of the item
    correct: int  # 0 or 1, as the built-in task scored the document
    n_options: int
    gold: str = ""
    original_gold: str = ""  # the original version's gold: what a built-in run of the benchmark must have asked
    stratum: str = ""  # MMStar's l2_category: the paired statistics' strata
    group: str = ""  # NaturalBench's group and slot
    slot: str = ""
    set_manifest: str | None = None  # SHA-256 of the scored set's manifest: the report opens that set only
    text_only_input: str | None = None  # text-only documents: "none" (no image) or "blank" (a grey canvas)
    schema_version: int = SCHEMA_VERSION

    def as_logged(self) -> dict:
        return asdict(self)

    @classmethod
    def from_logged(cls, logged: object, where: str) -> ContamRecord:
        checked(logged, where, REQUIRED)
        return cls(
            benchmark=str(logged["benchmark"]),
            item_id=str(logged["item_id"]),
            original_id=str(logged["original_id"]),
            variant=str(logged["variant"]),
            correct=int(logged["correct"]),
            n_options=int(logged["n_options"]),
            gold=str(logged.get("gold") or ""),
            original_gold=str(logged.get("original_gold") or ""),
            stratum=str(logged.get("stratum") or ""),
            group=str(logged.get("group") or ""),
            slot=str(logged.get("slot") or ""),
            set_manifest=logged.get("set_manifest"),
            text_only_input=logged.get("text_only_input"),
        )


def checked(logged: object, where: str, required: tuple[str, ...]) -> dict:
    """A logged record (this one, or a scanned task's), refused naming `where` when it is absent, of another
    schema version, without a field the reader needs, or with a correctness that is not 0 or 1."""
    if not isinstance(logged, dict):
        raise ValueError(f"{where}: no contam_ids (not written by an lmms-contam task?)")
    if logged.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{where}: schema version {logged.get('schema_version')}")
    missing = [name for name in required if name not in logged]
    if missing:
        raise ValueError(f"{where}: contam_ids lacks {', '.join(missing)}")
    correct = logged.get("correct", 0)
    if isinstance(correct, bool) or correct not in (0, 1):
        raise ValueError(f"{where}: contam_ids.correct is {correct!r}, expected 0 or 1")
    return logged
