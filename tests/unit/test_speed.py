"""`lmms-contam bench-scan` at a small size: every figure measured, with its baseline and ratio."""

from __future__ import annotations

import numpy as np

from lmms_contam.corpus.speed import _timed_rounds, compared


def test_sides_take_turns_in_alternating_order():
    calls = []
    seconds = _timed_rounds(lambda run: calls.append(("a", run)), lambda run: calls.append(("b", run)), repeats=3)
    assert calls == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]
    assert [len(s) for s in seconds] == [3, 3]


def test_a_figure_is_its_median_round():
    # Rounds' ratios (baseline / ours seconds) are 2, 1 and 0.5: the middle round is the figure.
    figure = compared("x", np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 2.0]), 10, "items/s", 0.9)
    assert (figure.ours, figure.baseline, figure.ratio) == (5.0, 5.0, 1.0)
    assert figure.rounds == (2.0, 1.0, 0.5)
    assert figure.meets_target
