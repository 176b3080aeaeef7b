"""The race's checks of its clean model (item 2 of issue 44) on records whose answers are known: a model that reads
the options passes them; one that learnt a letter per colour fails CircularEval and option shuffle."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.lab.race import perturbation_holds, reads_the_options
from lmms_contam.lab.race_table import PERTURBATION, Flag, RaceOutcome
from lmms_contam.records import ContamRecord
from lmms_contam.report.analysis import Analysed, analyse_detector
from lmms_contam.report.inputs import DetectorRun, Loaded
from lmms_contam.synthetic import benchmark
from lmms_contam.synthetic.benchmark import VARIED

CLEAN = Path("/models/clean-0123456789")


def _runs(right_in_order: bool, right_reordered: bool) -> Loaded:
    """The clean model's circular and option-shuffle runs on 120 varied items: clear items answered right as
    listed when `right_in_order`, and right in every other order when `right_reordered` (ambiguous items: wrong)."""
    runs = []
    for name in ("circular", "option_shuffle"):
        detector, records = DETECTORS[name], []
        for item_id, scene in benchmark.test_scenes(120, of=VARIED):
            orders = detector.orders(AskedItem(item_id, scene.options, scene.answer))
            for variant, order in orders.items():
                as_listed = order is None or list(order) == sorted(order)
                right = not scene.confusion and (right_in_order if as_listed else right_reordered)
                records.append(ContamRecord(VARIED.name, item_id, item_id, variant, int(right), 4))
        runs.append(DetectorRun(str(CLEAN), VARIED.name, name, records, source=f"{name}.jsonl"))
    return Loaded([], runs)


@pytest.mark.parametrize(
    ("reordered", "passes"),
    [(True, [True, True, True]), (False, [True, False, False])],
    ids=["reads the options", "a letter per colour"],
)
def test_the_clean_models_checks_on_known_records(reordered, passes):
    loaded = _runs(right_in_order=True, right_reordered=reordered)
    analysed = Analysed(results=[], detectors=[analyse_detector(run) for run in loaded.detectors], alpha=0.05)
    checks = reads_the_options(loaded, analysed, CLEAN)
    assert [check.passed for check in checks] == passes, checks
    clear = sum(not scene.confusion for _, scene in benchmark.test_scenes(120, of=VARIED))
    assert checks[1].detail.endswith(f"on {clear} clear items")
    assert "vanilla 1.000" in checks[1].detail and f"circular {1.0 if reordered else 0.0:.3f}" in checks[1].detail


def test_semantic_perturbation_must_flag_every_seed_of_the_papers_contamination():
    flags = {
        "image_question_answer-seed0": Flag(-0.4, 1e-6, True),
        "image_question_answer-seed1": Flag(-0.1, 0.03, True),  # flagged at 0.05, not at 0.01
        "image_question_answer-seed2": Flag(0.02, 0.5, False),
        "control-seed0": Flag(0.0, 1.0, False),
    }
    outcome = RaceOutcome(
        flags={name: {PERTURBATION: flag} for name, flag in flags.items()},
        kinds={name: name.rsplit("-", 1)[0] for name in flags},
        scores=dict.fromkeys(flags, 0.9),
    )
    checks = perturbation_holds(outcome)
    assert [check.passed for check in checks] == [True, False, False]  # one per seed of kind (a), none for controls
