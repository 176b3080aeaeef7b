"""The procedural benchmarks' scenes, counterfactuals and test sets, and the experiment's checks."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import datasets
import numpy as np
import pytest
from scipy.stats import chisquare

from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.masked_option import hidden_option
from lmms_contam.registry.specs import SPECS
from lmms_contam.schema import validate
from lmms_contam.synthetic import benchmark, varied
from lmms_contam.synthetic.benchmark import FIXED, VARIED
from lmms_contam.synthetic.scenes import CELL, KINDS, counterfactual, draw_scene, render

BOTH = pytest.mark.parametrize("of", [FIXED, VARIED], ids=lambda of: of.name)


def test_scenes_are_identical_in_another_process():
    code = "from lmms_contam.synthetic.scenes import draw_scene; print(repr(draw_scene('synthetic-000042')))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == repr(draw_scene("synthetic-000042"))
    assert draw_scene("synthetic-000042") != draw_scene("synthetic-000043")


@BOTH
@pytest.mark.parametrize("item", range(20))
def test_counterfactual_changes_only_the_target(item, of):
    scene = of.draw(f"synthetic-{item:06d}", 0)
    new = (scene.answer + 1 + item % 3) % 4
    before = np.asarray(render(scene), dtype=int)
    after = np.asarray(render(counterfactual(scene, new)), dtype=int)
    changed = np.argwhere((before != after).any(axis=-1))
    column, row = scene.target_cell % 2, scene.target_cell // 2
    assert len(changed) > 50, "the target's colour must change"
    assert changed[:, 0].min() >= row * CELL and changed[:, 0].max() < (row + 1) * CELL
    assert changed[:, 1].min() >= column * CELL and changed[:, 1].max() < (column + 1) * CELL
    drawn = counterfactual(scene, new).target_colour()
    palette = [np.array(colour) for colour in scene.colours]
    mixed = (1 - scene.mix) * palette[new] + scene.mix * palette[(new + scene.confusion) % 4]
    assert np.allclose(drawn, np.clip(np.round(mixed + np.array(scene.noise)), 0, 255))


@BOTH
def test_counterfactuals_are_exactly_as_readable_as_their_originals(of):
    """An ideal reader (the nearest colour) is right on a counterfactual exactly when it is right on
    its original, for every possible new answer, so no sample of items favours either version."""
    for _, scene in benchmark.test_scenes(1000, of=of):
        right = scene.looks_like() == scene.answer
        for new in set(range(4)) - {scene.answer}:
            other = counterfactual(scene, new)
            assert (other.looks_like() == other.answer) == right
    # The first 300 items with the answers the benchmark swapped to (there, the earlier design lost 0.043).
    scenes = benchmark.test_scenes(300, of=of)
    swapped = [counterfactual(s, benchmark.swapped_answer(benchmark.to_item(i, s, of), 0)) for i, s in scenes]
    assert [s.looks_like() == s.answer for _, s in scenes] == [c.looks_like() == c.answer for c in swapped]


@BOTH
def test_about_a_quarter_of_items_are_beyond_skill(of):
    scenes = [scene for _, scene in benchmark.test_scenes(2000, of=of)]
    readable = np.mean([scene.looks_like() == scene.answer for scene in scenes])
    assert 0.65 <= readable <= 0.80, readable
    assert {scene.kind for scene in scenes} == set(KINDS)
    assert abs(np.mean([scene.kind == "circle" for scene in scenes]) - 0.5) < 0.05


@BOTH
def test_test_set_is_a_valid_perturbed_set(tmp_path, of):
    path = benchmark.build_test_set(40, tmp_path / f"{of.name}.parquet", of=of)
    rows = datasets.load_dataset("parquet", data_files=str(path), split="train")
    validate(rows, of.name, str(path))
    assert len(rows) == 40 and set(rows["benchmark"]) == {of.name}
    counterfactuals = benchmark.perturbed_examples(40, of=of)
    for row, example in zip(rows, counterfactuals, strict=True):
        assert row["new_answer"] == example.answer != row["original_answer"]
        assert row["question"] == example.question and row["options"] == list(of.draw(row["item_id"], 0).options)
        assert np.array_equal(np.asarray(row["image"]), np.asarray(example.image))
        assert row["category"] == row["l2_category"] in KINDS


def test_varied_items_vary_their_options_order_and_wording():
    scenes = [scene for _, scene in benchmark.test_scenes(2000, of=VARIED)]
    assert len({scene.question_text() for scene in scenes}) >= 0.99 * len(scenes), "an item's text is its own"
    assert len({scene.stem.split(" ", 1)[0] for scene in scenes}) >= 4, "several wordings"
    names = Counter(name for scene in scenes for name in scene.options)
    assert set(names) == {name for _, pair in varied.COLOURS.values() for name in pair}, "every name of every colour"
    golds = Counter(scene.letter for scene in scenes)
    assert chisquare(list(golds.values())).pvalue > 1e-3, f"the gold's letter says nothing: {golds}"
    # The same four colours listed in several orders, so a letter cannot stand for a colour.
    orders = Counter(tuple(varied.colour_of(name) for name in scene.options) for scene in scenes)
    sets = Counter(frozenset(order) for order in orders.elements())
    common = sets.most_common(1)[0][0]
    assert len([order for order in orders if frozenset(order) == common]) >= 5


def test_a_hidden_wrong_option_is_named_at_the_stated_rate_by_construction():
    """Given the three options shown, the hidden one is any of the other colours under any of its names, each
    as likely: so no model that never saw the item names it more often than the spec's rate."""
    assert SPECS["synthetic_varied"].masked_option_chance == pytest.approx(1 / varied.MASKED_CANDIDATES)
    places = Counter()
    for item_id, scene in benchmark.test_scenes(5000, of=VARIED):
        hidden = hidden_option(AskedItem(item_id, scene.options, scene.answer))
        assert hidden != scene.answer
        shown = {varied.colour_of(text) for i, text in enumerate(scene.options) if i != hidden}
        candidates = sorted(
            name for colour, (_, pair) in varied.COLOURS.items() if colour not in shown for name in pair
        )
        assert len(candidates) == varied.MASKED_CANDIDATES
        places[candidates.index(scene.options[hidden])] += 1
    assert chisquare([places[i] for i in range(varied.MASKED_CANDIDATES)]).pvalue > 1e-3, places


def _row(model: str, strategy: str, degree: int, seed: int, acc: float, delta: float, p: float, verdict: str):
    from lmms_contam.lab.experiment import Row

    return Row(model, strategy, degree, seed, acc, acc + delta, delta, (delta - 0.05, delta + 0.05), p, verdict,
               {"circle": acc, "square": acc}, {"circle": 1e-9, "square": 1e-9})  # fmt: skip


def test_checks_pass_only_when_every_claim_holds():
    from lmms_contam.lab.experiment import check_experiment

    good = [_row("clean", "clean", 0, s, 0.66, -0.01, 0.6, "inconclusive") for s in (0, 1)]
    good += [_row(f"full-e{d}", "full", d, s, 0.66 + d / 150, -d / 150, 10.0**-d, "contaminated")
             for s in (0, 1) for d in (10, 20, 30)]  # fmt: skip
    assert all(c.passed for c in check_experiment(good))

    bad = list(good)
    bad[0] = _row("clean", "clean", 0, 0, 0.66, -0.06, 0.01, "contaminated")  # a false alarm
    bad[-1] = _row("full-e30", "full", 30, 1, 0.70, -0.02, 0.2, "inconclusive")  # weak, not flagged, off trend
    failed = {c.claim for c in check_experiment(bad) if not c.passed}
    assert failed == {
        "clean (seed 0) not flagged",
        "full-e30 (seed 1) inflates the original score by at least 0.10",
        "full-e30 (seed 1) flagged (delta < 0, McNemar p < 0.01)",
        "full: the same verdict for every seed at each degree",
        "full: delta falls as the degree rises (Spearman <= -0.8, clean = degree 0)",
    }
