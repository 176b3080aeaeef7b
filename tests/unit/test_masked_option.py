"""Masked-option guessing: which option is hidden, how a reply is matched, and its signal's statistics."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest

from lmms_contam.commands.reporting import BASELINE_OPTIONS
from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.masked_option import (
    MASKED_OPTION,
    against_reference,
    hidden_option,
    masked_signal,
    names_hidden_option,
)
from lmms_contam.detectors.options import MASK, shown_masked
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.records import ContamRecord


def test_the_hidden_option_is_a_wrong_one_seeded_by_the_item():
    items = [AskedItem(f"item-{i}", ("w", "x", "y", "z"), gold=i % 4) for i in range(400)]
    hidden = [hidden_option(item) for item in items]
    assert all(h != item.gold for h, item in zip(hidden, items, strict=True))
    assert hidden == [hidden_option(item) for item in items], "the same in every run"
    assert {h - item.gold for h, item in zip(hidden, items, strict=True) if item.gold == 0} == {1, 2, 3}
    with pytest.raises(ValueError, match="needs a wrong option"):
        hidden_option(AskedItem("one", ("only",), gold=0))


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        ("crimson", 1),
        ("  Crimson.\n", 1),
        ('"crimson"', 1),
        ("B: crimson", 1),
        ("(C) crimson", 1),
        ("crimson\nbecause it is red", 1),
        ("crimson red", 0),
        ("red", 0),
        ("B", 0),
        ("", 0),
    ],
)
def test_a_reply_names_the_hidden_text_exactly_or_not_at_all(reply, named):
    assert names_hidden_option(reply, "Crimson") == named


def test_the_question_and_options_show_the_mask_in_its_place():
    question = "What colour is the circle?\nOptions: A: red, B: cobalt, C: lemon, D: rose"
    shown = shown_masked("synthetic_varied", "i1", question, ["red", "cobalt", "lemon", "rose"], 2)
    assert shown["options"] == ["red", "cobalt", MASK, "rose"]
    assert shown["question"] == f"What colour is the circle?\nOptions: A: red, B: cobalt, C: {MASK}, D: rose"


def _records(benchmark: str, named: list[int]) -> list[ContamRecord]:
    return [
        ContamRecord(benchmark, f"i{k}", f"i{k}", MASKED_OPTION, correct, 4, gold="hidden")
        for k, correct in enumerate(named)
    ]


def test_against_the_rate_by_construction_an_exact_binomial_test():
    named = [1] * 9 + [0] * 31  # 9 of 40 named, where a model that never saw them names 1 in 10
    signal = masked_signal(_records("synthetic_varied", named))
    assert (signal.n_items, signal.n_changed, signal.reference, signal.score) == (40, 9, 0.1, 9 / 40)
    assert signal.p_value == pytest.approx(binomtest(9, 40, 0.1, alternative="greater").pvalue)
    assert signal.flagged(0.05) and signal.multimodal_leakage is None
    assert not masked_signal(_records("synthetic_varied", [1] * 4 + [0] * 36)).flagged(0.05)


def test_without_a_rate_by_construction_there_is_no_p_value():
    signal = masked_signal(_records("mmstar", [1] * 30 + [0] * 10))
    assert math.isnan(signal.reference) and math.isnan(signal.p_value) and signal.score == 0.75
    assert not signal.flagged(0.05)


def test_against_a_clean_reference_model_exact_mcnemar_on_the_same_items():
    ours = _records("mmstar", [1] * 12 + [0] * 8)
    theirs = _records("mmstar", [0] * 10 + [1] * 2 + [0] * 8)  # the reference names 2, both among ours
    signal = against_reference(ours, theirs, "clean-ref")
    assert (signal.reference, signal.score, signal.baseline) == (0.1, 0.6, "clean-ref")
    assert signal.p_value == pytest.approx(binomtest(10, 10, 0.5).pvalue) and signal.flagged(0.05)


def test_the_report_offers_each_detectors_reference_option():
    declared = {d.baseline.option: name for name, d in DETECTORS.items() if d.baseline}
    assert declared == {option: detector for option, (detector, _) in BASELINE_OPTIONS.items()}


def test_vlmevalkit_exports_refuse_it_saying_why():
    from lmms_contam.hosts.vlmevalkit.export import export_set, families

    assert MASKED_OPTION not in families()
    with pytest.raises(ValueError, match="VLMEvalKit cannot ask it: .* exact match against the hidden option's text"):
        export_set("mmstar", MASKED_OPTION)
