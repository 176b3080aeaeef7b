"""The detector race's table: which models each detector flags, per column, with exact 95% intervals."""

from __future__ import annotations

import pytest
from scipy.stats import beta

from lmms_contam.lab.race_table import (
    CIRCULAR_VS_CLEAN,
    PERTURBATION,
    Flag,
    RaceOutcome,
    detectors,
    exact_interval,
    inflation,
    race_table,
    rates,
)


def _outcome(flagged: dict[str, set[str]]) -> RaceOutcome:
    """Clean, and per seed a control and the text-only kind; `flagged`: detector key -> the models it flags."""
    kinds = {"clean": "clean"}
    for seed in range(3):
        kinds[f"control-seed{seed}"] = "control"
        kinds[f"text_only-seed{seed}"] = "text_only"
    keys = [PERTURBATION, "circular", "option_shuffle", "text_only", "masked_option"]
    flags = {name: {k: Flag(-0.1, 0.01, name in flagged.get(k, set())) for k in keys} for name in kinds}
    for name, kind in kinds.items():  # the clean model is this row's reference: it has no reading of its own
        if kind != "clean":
            flags[name][CIRCULAR_VS_CLEAN] = Flag(-0.05, 0.01, name in flagged.get(CIRCULAR_VS_CLEAN, set()))
    scores = {name: 0.6 + 0.1 * (kind == "text_only") + 0.01 * i for i, (name, kind) in enumerate(kinds.items())}
    return RaceOutcome(flags=flags, kinds=kinds, scores=scores)


def test_rates_count_false_accusations_over_clean_and_controls_and_detections_per_kind():
    outcome = _outcome({"text_only": {"text_only-seed0", "text_only-seed2", "control-seed1"}, "circular": {"clean"}})
    table = rates(outcome)
    assert list(table) == detectors()
    assert table["text-only"]["false accusations"] == (1, 4) and table["text-only"]["text_only"] == (2, 3)
    assert table["CircularEval"]["false accusations"] == (1, 4) and table["CircularEval"]["text_only"] == (0, 3)
    assert table[PERTURBATION]["image_question_answer"] == (0, 0)  # no such model here: an empty column
    assert list(table)[1:3] == ["CircularEval", CIRCULAR_VS_CLEAN]
    low, high = exact_interval(2, 3)
    assert f"| text-only | 1/4 [0.01, 0.81] | - | 2/3 [{low:.2f}, {high:.2f}] | - | - |" in race_table(outcome)


def test_circular_eval_against_the_clean_model_counts_false_accusations_over_the_controls():
    """The clean model is that row's reference, so it is neither accused nor counted as spared."""
    table = rates(_outcome({CIRCULAR_VS_CLEAN: {"control-seed0", "text_only-seed1"}, "circular": {"clean"}}))
    assert table[CIRCULAR_VS_CLEAN]["false accusations"] == (1, 3) and table[CIRCULAR_VS_CLEAN]["text_only"] == (1, 3)
    assert table["CircularEval"]["false accusations"] == (1, 4)
    assert f"| {CIRCULAR_VS_CLEAN} | 1/3 [0.01, 0.91] |" in race_table(_outcome({CIRCULAR_VS_CLEAN: {"control-seed2"}}))


def test_each_kinds_score_is_set_against_the_controls():
    """Scores 0.60 + 0.01 per model in plan order, text-only models 0.10 higher: controls 0.61, 0.63, 0.65."""
    found = inflation(_outcome({}))
    assert found["control"] == pytest.approx((0.63, 0.0))
    assert found["text_only"] == pytest.approx((0.74, 0.11)) and found["clean"] == pytest.approx((0.60, -0.03))
    assert "| text_only | 0.740 | +0.110 |" in race_table(_outcome({}))


@pytest.mark.parametrize(("hits", "n"), [(0, 4), (1, 4), (3, 3), (2, 3), (7, 20)])
def test_the_interval_is_clopper_pearsons(hits, n):
    low, high = exact_interval(hits, n)
    assert low == pytest.approx(beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0)
    assert high == pytest.approx(beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0)


def test_a_model_without_a_detectors_reading_is_refused():
    outcome = _outcome({})
    del outcome.flags["control-seed2"]["masked_option"]
    with pytest.raises(ValueError, match="masked option: no reading of control-seed2"):
        rates(outcome)


def test_the_plot_is_written_whole(tmp_path):
    from PIL import Image

    from lmms_contam.lab.race_table import plot

    plot(_outcome({"text_only": {"text_only-seed1"}}), tmp_path / "race.png")
    assert Image.open(tmp_path / "race.png").size[0] > 600 and list(tmp_path.iterdir()) == [tmp_path / "race.png"]
