"""Stage 1: pick the counterfactual's gold answer.

The new answer is drawn uniformly among the other options, from a seed derived with SHA-256 from
(benchmark, item id, seed): the same in every process, run and machine.
"""

from __future__ import annotations

import random

from lmms_contam.items import Item, Skipped
from lmms_contam.letters import option_letters
from lmms_contam.schema import columns_for
from lmms_contam.stats import stable_seed


def swap_answer(item: Item, seed: int = 0) -> str | Skipped:
    """The new gold (a letter, or an option text where the benchmark answers in text)."""
    if len(item.options) < 2:
        return Skipped(item.benchmark, item.original_id, "fewer than two options: nothing to swap to")
    letters = columns_for(item.benchmark).answer_style == "letter"
    choices = option_letters(len(item.options)) if letters else list(item.options)
    if item.answer not in choices:
        return Skipped(item.benchmark, item.original_id, f"answer {item.answer!r} is not among the options")
    others = [choice for choice in choices if choice != item.answer]
    rng = random.Random(stable_seed("answer-swap", item.benchmark, item.original_id, str(seed)))
    return rng.choice(others)
