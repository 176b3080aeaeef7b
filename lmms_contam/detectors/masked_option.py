"""Masked-option guessing: TS-Guessing's multiple-choice form (Deng et al., NAACL 2024), the multiple-choice
analogue of MM-Detect's slot guessing. One wrong option of the item (seeded by its id) is shown as a mask and
the model is asked for its text; a model that names hidden wrong options exactly, beyond what one that never
saw the items can, remembers the items' text. Variant: `masked_option`.

The reference is a clean reference model's run of the same versions where the user gives one (the report's
--masked-option-reference), else the rate a model that never saw an item can reach by construction, which
only a procedural benchmark states (its spec's masked_option_chance); with neither, the detector reports the
rate and no p-value (a real benchmark's wrong options can be guessable: "None of the above", a near-synonym).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from lmms_contam.detectors.base import AskedItem, Baseline, Detector, Order
from lmms_contam.detectors.signals import DetectorSignal, gain_over_run, versions_by_item
from lmms_contam.records import ContamRecord
from lmms_contam.registry.specs import SPECS
from lmms_contam.stats import above_chance_p, stable_seed

MASKED_OPTION = "masked_option"
INSTRUCTION = "\nOne option is hidden as [MASK]. Reply with the hidden option's text only."
LETTER_PREFIX = re.compile(r"^\(?[A-Z][.:)]\s+")  # "B: crimson", "(B) crimson": the letter the mask stands at


def hidden_option(item: AskedItem) -> int:
    """The wrong option an item hides, drawn by a generator seeded from hashlib of its id."""
    wrong = [i for i in range(len(item.options)) if i != item.gold]
    if not wrong:
        raise ValueError(f"{item.item_id}: masked-option guessing needs a wrong option to hide")
    return wrong[int(np.random.default_rng(stable_seed("masked-option", item.item_id)).integers(len(wrong)))]


def normalised(text: str) -> str:
    """A reply or option text as exact matching compares them: its first line, a leading option letter
    dropped, surrounding quotes, spaces and a final full stop stripped, case folded, inner spaces collapsed."""
    line = text.strip().split("\n", 1)[0].strip()
    line = LETTER_PREFIX.sub("", line).strip().strip("\"'`").strip().rstrip(".").strip()
    return " ".join(line.split()).casefold()


def names_hidden_option(reply: str, hidden_text: str) -> int:
    """1 where the reply names the hidden option's text exactly (after `normalised`), else 0."""
    return int(bool(normalised(hidden_text)) and normalised(reply) == normalised(hidden_text))


def _asked(records: Iterable[ContamRecord]) -> dict[str, ContamRecord]:
    items = versions_by_item(records, lambda versions: set(versions) == {MASKED_OPTION})
    return {item: versions[MASKED_OPTION] for item, versions in items.items()}


def chance_by_construction(benchmarks: set[str]) -> float:
    """The benchmark's stated rate for a model that never saw the items; NaN where it states none."""
    rates = {SPECS[name].masked_option_chance if name in SPECS else None for name in benchmarks}
    rate = rates.pop() if len(rates) == 1 else None
    return float("nan") if rate is None else float(rate)


def masked_signal(records: Iterable[ContamRecord], averages_strata: bool = True) -> DetectorSignal:
    """Exact matches against the benchmark's rate by construction: a one-sided exact binomial test, over
    items whatever the host's accuracy averages (the rate is the same for every item)."""
    kept = list(_asked(records).values())
    n, right = len(kept), sum(r.correct for r in kept)
    chance = chance_by_construction({r.benchmark for r in kept})
    p_value = float("nan")
    if n and not np.isnan(chance):
        p_value = above_chance_p([r.correct for r in kept], [chance] * n)
    return DetectorSignal(
        detector=MASKED_OPTION,
        n_items=n,
        reference=chance,
        score=right / n if n else float("nan"),
        p_value=p_value,
        n_changed=right,
        flags_a_gain=True,
    )


def against_reference(
    records: Iterable[ContamRecord], reference_records: Iterable[ContamRecord], reference: str
) -> DetectorSignal:
    """Exact matches against a clean reference model's on the same items: exact McNemar on the pairs."""
    return gain_over_run(MASKED_OPTION, _asked(records), _asked(reference_records), reference)


def masked_orders(_item: AskedItem) -> dict[str, Order | None]:
    return {MASKED_OPTION: None}


DETECTOR = Detector(
    name=MASKED_OPTION,
    label="masked option",
    description="exact matches of a hidden wrong option's text, minus the rate without having seen the item",
    about="Masked-option guessing (TS-Guessing's multiple-choice form) on the kept {label} items: each original "
    "item with one wrong option (seeded by item id) shown as [MASK], and the model asked for its text instead of "
    "a letter; a reply naming the hidden text exactly (case, quotes, a leading letter and a final full stop aside) "
    "counts. Naming hidden options beyond a clean reference model, or beyond the benchmark's rate by "
    "construction, means the items' text is remembered. Model-specific prompts are dropped: they ask for a letter.",
    metrics=(
        ("chance", True),
        ("acc_masked", False),
        ("masked_excess", False),
        ("masked_p", False),
        ("n_items", True),
        ("n_named", False),
    ),
    orders=masked_orders,
    owns=lambda variant: variant == MASKED_OPTION,
    signal=masked_signal,
    baseline=Baseline(
        option="--masked-option-reference",
        signal=against_reference,
        default="chance",
    ),
    hides=hidden_option,
    instruction=INSTRUCTION,
    scores_reply=names_hidden_option,
)
