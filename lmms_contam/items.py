"""The record every benchmark loader produces: one multiple-choice item as the harness scores it."""

from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image

from lmms_contam.fingerprint import image_sha256


@dataclass(frozen=True)
class Item:
    benchmark: str
    original_id: str
    question: str  # exactly as the built-in lmms-eval task reads it
    options: tuple[str, ...]
    answer: str  # option letter (MMStar, RealWorldQA) or option text (NaturalBench)
    image: Image.Image
    extra: dict[str, str] = field(default_factory=dict)  # the benchmark's category fields

    def fingerprint(self) -> dict:
        """Everything a stage computed from this item could depend on (the image by its pixels)."""
        return {
            "benchmark": self.benchmark,
            "original_id": self.original_id,
            "question": self.question,
            "options": list(self.options),
            "answer": self.answer,
            "image": image_sha256(self.image),
            "extra": self.extra,
        }


@dataclass(frozen=True)
class Skipped:
    """An item a stage could not use, and why: counted in every manifest, never dropped silently."""

    benchmark: str
    original_id: str
    reason: str
