"""The flaw model, the ideal reader and the studies' checks, without a judge or a model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from lmms_contam.lab import ideal_reader
from lmms_contam.lab.judge_server import JudgeErrors
from lmms_contam.synthetic import benchmark, flaws
from lmms_contam.synthetic.scenes import KINDS, counterfactual, render

IDS = [f"synthetic-{i:06d}" for i in range(4000)]
# The studies' modules (experiment, flaw_study, judge_study) run models through the harness and import torch:
# the tests below import them when they run, so collecting this tier stays light.


def test_flaws_are_nested_across_rates_with_fixed_shares():
    at = {rate: {i: flaws.flaw_of(i, rate) for i in IDS} for rate in (0.0, 0.1, 0.2, 0.4)}
    assert not any(at[0.0].values())
    for low, high in ((0.1, 0.2), (0.2, 0.4)):
        assert all(at[high][i] == kind for i, kind in at[low].items() if kind)  # flawed at low: same at high
    for rate in (0.1, 0.2, 0.4):
        assert abs(sum(map(bool, at[rate].values())) / len(IDS) - rate) < 0.025
    kinds = Counter(kind for kind in at[0.4].values() if kind)
    assert set(kinds) == set(flaws.FLAW_SHARES)
    for kind, share in flaws.FLAW_SHARES.items():
        assert abs(kinds[kind] / sum(kinds.values()) - share) < 0.05, kinds


def _swapped(count: int):
    for item_id, scene in benchmark.test_scenes(count):
        yield item_id, scene, benchmark.swapped_answer(benchmark.to_item(item_id, scene), 0)


def test_the_ideal_reader_reads_every_scene_as_the_nearest_colour():
    """From pixels alone, it names what the scene's colour is nearest to, on originals and counterfactuals."""
    for _, scene, new in _swapped(300):
        options = KINDS[scene.kind].options
        assert ideal_reader.correct_options(render(scene), scene.kind, options) == [scene.looks_like()]
        other = counterfactual(scene, new)
        assert ideal_reader.correct_options(render(other), scene.kind, options) == [other.looks_like()]
    with pytest.raises(ValueError, match="32x32"):
        ideal_reader.shapes(render(scene).resize((64, 64)))


def test_each_flaw_kind_shows_what_it_says():
    seen = Counter()
    for item_id, scene, new in _swapped(200):
        options = KINDS[scene.kind].options
        read = {kind: ideal_reader.correct_options(flaws.flawed_image(scene, new, kind, item_id), scene.kind, options)
                for kind in flaws.FLAW_SHARES}  # fmt: skip
        assert read["unchanged"] == [scene.looks_like()]
        assert read["removed"] == []  # no target: no option is right
        (third,) = read["third_option"]
        if not scene.confusion:  # a clear scene shows the third option itself
            assert third not in (scene.answer, new)
        mixed = flaws.flawed_image(scene, new, "ambiguous", item_id)
        (colour,) = [c for shape, c in ideal_reader.shapes(mixed) if shape == scene.kind]
        palette = [np.array(c, dtype=float) for c in KINDS[scene.kind].palette.values()]
        halfway = (palette[new] + palette[scene.answer]) / 2 + np.array(scene.noise)
        assert np.allclose(colour, np.clip(np.round(halfway), 0, 255))
        seen[read["ambiguous"] == [new]] += 1
    assert seen[True] and seen[False]  # halfway: some read as the new answer, some as the old


def _row(model: str, strategy: str, delta: float, p: float):
    from lmms_contam.lab.experiment import Row

    return Row(model, strategy, 30, 0, 0.7, 0.7 + delta, delta, (delta - 0.05, delta + 0.05), p, "-", {}, {})


def test_the_study_checks_fail_when_verification_does_not_help():
    from lmms_contam.lab import flaw_study

    def rows(clean_delta: float, clean_p: float, full_p: float) -> list:
        out = []
        for verified in (False, True):
            out.append(flaw_study.FlawRow(0.4, verified, 300, _row("clean", "clean", clean_delta, clean_p)))
            out.append(flaw_study.FlawRow(0.4, verified, 300, _row("full-e30", "full", -0.2, full_p)))
        return out

    good = flaw_study.check_flaw_study(rows(-0.01, 0.5, 1e-6))
    assert good and all(c.passed for c in good)
    assert len(good) == 2  # the unverified set at f > 0 is measured, not checked
    assert not all(c.passed for c in flaw_study.check_flaw_study(rows(-0.1, 0.001, 1e-6)))  # clean flagged after verify
    assert not all(c.passed for c in flaw_study.check_flaw_study(rows(-0.01, 0.5, 0.02)))  # contamination missed
    outcome = flaw_study.FlawOutcome(rows(-0.1, 0.001, 1e-6), [])
    assert outcome.first_accusing_rate() == 0.4


def test_the_judge_study_checks_and_safe_rate_follow_the_verdicts():
    from lmms_contam.lab import judge_study

    def cell(keep: float, clean_p: float, full_p: float):
        rows = [_row("clean", "clean", -0.05, clean_p), _row("full-e30", "full", -0.2, full_p)]
        return judge_study.Cell(rate=0.4, keep_flawed=keep, reject_good=0.0, seed=0, items=300, kept=200, flawed=120,
                                flawed_kept=10, good=180, good_kept=170, rows=rows,
                                calibration={"keep_flawed": 0.05 + keep, "reject_good": 0.0})  # fmt: skip

    cells = [cell(0.0, 0.5, 1e-6), cell(0.1, 0.2, 1e-6), cell(0.2, 0.01, 1e-6), cell(0.4, 0.3, 1e-6)]
    outcome = judge_study.JudgeOutcome(cells)
    assert outcome.safe_keep_flawed() == 0.1  # 0.2 flags the clean model; 0.4 does not count past it
    assert outcome.safe_calibrated_keep_flawed() == pytest.approx(0.15)
    assert (
        all(c.passed for c in judge_study.check_judge_study(cells)) and len(judge_study.check_judge_study(cells)) == 2
    )
    assert not all(
        c.passed for c in judge_study.check_judge_study([cell(0.0, 0.01, 1e-6)])
    )  # clean flagged by the ideal judge
    assert not all(c.passed for c in judge_study.check_judge_study([cell(0.0, 0.5, 0.02)]))  # contamination missed
    assert judge_study.JudgeOutcome([cell(0.0, 0.01, 1e-6)]).safe_keep_flawed() is None
    with pytest.raises(ValueError, match="keep_flawed is a rate"):
        JudgeErrors(keep_flawed=1.5)
