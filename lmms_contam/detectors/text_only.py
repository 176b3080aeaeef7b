"""MMStar-style leakage: the item's question with the image withheld; right answers beyond guessing among the
options (or beyond the model's base LLM) mean the answer is in the text, or memorised. Variant: `text_only`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from lmms_contam import stats
from lmms_contam.detectors.base import AskedItem, Baseline, Detector, Order
from lmms_contam.detectors.signals import DetectorSignal, gain_over_run, versions_by_item
from lmms_contam.records import ContamRecord

TEXT_ONLY = "text_only"


def _asked(records: Iterable[ContamRecord]) -> dict[str, ContamRecord]:
    items = versions_by_item(records, lambda versions: set(versions) == {TEXT_ONLY})
    return {item: versions[TEXT_ONLY] for item, versions in items.items()}


def text_only_signal(records: Iterable[ContamRecord], averages_strata: bool = True) -> DetectorSignal:
    """Against chance: a one-sided Poisson-binomial test of the right answers, over items whatever the host's
    accuracy averages (chance differs per item, so there is no stratum to weigh)."""
    kept = list(_asked(records).values())
    correct = [r.correct for r in kept]
    chance = [1.0 / r.n_options for r in kept]
    n = len(kept)
    return DetectorSignal(
        detector=TEXT_ONLY,
        n_items=n,
        reference=sum(chance) / n if n else float("nan"),
        score=sum(correct) / n if n else float("nan"),
        p_value=stats.above_chance_p(correct, chance),
        n_changed=sum(correct),
        flags_a_gain=True,
    )


def against_baseline(
    records: Iterable[ContamRecord], baseline_records: Iterable[ContamRecord], baseline: str
) -> DetectorSignal:
    """MMStar's multi-modal leakage as its paper defines it: the model's accuracy without the image (S_wv)
    against its base LLM's text-only accuracy (S_t) on the same items, plain averages; exact McNemar on the
    paired answers."""
    return replace(gain_over_run(TEXT_ONLY, _asked(records), _asked(baseline_records), baseline), gain_is_leakage=True)


def text_only_orders(_item: AskedItem) -> dict[str, Order | None]:
    return {TEXT_ONLY: None}


DETECTOR = Detector(
    name=TEXT_ONLY,
    label="text-only",
    description="accuracy with the image withheld, minus chance (1 / options)",
    about="The kept {label} items' original questions with the image withheld: no image where the model "
    "loader takes a prompt without one, else a blank grey canvas of the same size (LMMS_CONTAM_TEXT_ONLY_IMAGE). "
    "Right answers above chance mean the answer is inferable from the text alone, or memorised.",
    metrics=(
        ("chance", True),
        ("acc_text_only", False),
        ("text_only_excess", False),
        ("text_only_p", False),
        ("n_items", True),
        ("n_right", False),
    ),
    orders=text_only_orders,
    owns=lambda variant: variant == TEXT_ONLY,
    signal=text_only_signal,
    withholds_image=True,
    baseline=Baseline(
        option="--text-only-baseline",
        signal=against_baseline,
        default="chance",
    ),
)
