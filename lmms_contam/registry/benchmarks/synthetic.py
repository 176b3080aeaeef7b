"""The controlled experiment's procedural benchmark: MMStar's layout and scoring, and no hub source (its sets are
generated, never scanned or perturbed from hub rows)."""

from __future__ import annotations

from lmms_contam.registry.base import INLINE, LETTERS_BY_CATEGORY, BenchmarkSpec

SPEC = BenchmarkSpec(
    name="synthetic",
    label="synthetic",
    columns=LETTERS_BY_CATEGORY,
    option_layout=INLINE,
    stratified=True,
    # Each kind lists its one set of colour names in one order, so a model that never saw an item knows which
    # name a mask hides: masked-option guessing cannot work here, and says so (never flagged).
    masked_option_chance=1.0,
)
