"""The race's checks of its clean model (item 2 of issue 44) on records whose answers are known: a model that reads
the options passes them; one that learnt a letter per colour fails CircularEval and option shuffle."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.lab.race import circular_against_clean, perturbation_holds, reads_the_options
from lmms_contam.lab.race_models import RaceModel
from lmms_contam.lab.race_table import CIRCULAR_VS_CLEAN, PERTURBATION, Flag, RaceOutcome
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


def test_circular_eval_against_the_clean_model_flags_what_rotation_loses_beyond_it():
    """Every model right on every item in order; rotation loses the clean model 12 items, a control 2 more, and
    a leaked model 48 more: only the leaked one is flagged, by the drop beyond the clean model's."""

    def run(folder: Path, loses) -> DetectorRun:
        records = []
        for k, (item_id, scene) in enumerate(benchmark.test_scenes(120, of=VARIED)):
            for variant in DETECTORS["circular"].orders(AskedItem(item_id, scene.options, scene.answer)):
                right = variant == "rotation0" or not loses(k)
                records.append(ContamRecord(VARIED.name, item_id, item_id, variant, int(right), 4))
        return DetectorRun(str(folder), VARIED.name, "circular", records, source=f"{folder.name}.jsonl")

    models = {
        RaceModel("clean"): (CLEAN, lambda k: k % 10 == 0),
        RaceModel("control", 0): (Path("/models/control-seed0-x"), lambda k: k % 10 == 0 or k in (5, 15)),
        RaceModel("image_question_answer", 0): (Path("/models/iqa-seed0-x"), lambda k: k % 2 == 0),
    }
    loaded = Loaded([], [run(folder, loses) for folder, loses in models.values()])
    flags = circular_against_clean(loaded, {model: folder for model, (folder, _) in models.items()})
    assert set(flags) == {"control-seed0", "image_question_answer-seed0"}  # the clean model is the reference
    control, leaked = (flags[name][CIRCULAR_VS_CLEAN] for name in ("control-seed0", "image_question_answer-seed0"))
    assert control.signal == pytest.approx(-2 / 120) and control.p_value == pytest.approx(0.5) and not control.flagged
    assert leaked.signal == pytest.approx(-48 / 120) and leaked.p_value < 1e-10 and leaked.flagged
