"""The detector race's procedural benchmark: the synthetic benchmark's scenes with options, order and wording
drawn per item (synthetic/varied.py), MMStar's layout and scoring, and no hub source."""

from __future__ import annotations

from lmms_contam.registry.base import INLINE, LETTERS_BY_CATEGORY, BenchmarkSpec

SPEC = BenchmarkSpec(
    name="synthetic_varied",
    label="synthetic (varied)",
    columns=LETTERS_BY_CATEGORY,
    option_layout=INLINE,
    stratified=True,
    # 1 / varied.MASKED_CANDIDATES, written out so that the registry imports no scene code (the command line
    # builds from it); tests/unit/test_synthetic_scenes.py checks the two agree.
    masked_option_chance=1 / 10,
)
