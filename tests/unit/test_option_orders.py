"""The peer detectors' option orders and signals, from records alone."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers.fixtures import RELEASE
from scipy.stats import binomtest

from lmms_contam import stats
from lmms_contam.benchmarks.mm_perturb import read_tsv, row_options
from lmms_contam.detectors.circular import CIRCULAR, UNROTATED
from lmms_contam.detectors.option_shuffle import OPTION_SHUFFLE
from lmms_contam.detectors.options import gold_moving_shuffle, names_option_letters, reorder_question, rotations
from lmms_contam.detectors.signals import DetectorSignal
from lmms_contam.detectors.text_only import TEXT_ONLY
from lmms_contam.records import ContamRecord
from lmms_contam.schema import PerturbedSetError


def test_rotations_take_the_gold_through_every_position():
    for n in (2, 3, 4, 5):
        orders = rotations(n)
        for gold in range(n):
            positions = [order.index(gold) for order in orders]
            assert sorted(positions) == list(range(n))
            assert positions[0] == gold and gold not in positions[1:]


def test_shuffles_move_the_gold_and_agree_across_processes():
    keys = [(f"item-{i}", 2 + i % 4, i % (2 + i % 4)) for i in range(300)]
    code = (
        "import json, sys; from lmms_contam.detectors.options import gold_moving_shuffle as s; "
        "print(json.dumps([s(i, n, g) for i, n, g in json.loads(sys.argv[1])]))"
    )
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", code, json.dumps(keys)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        runs.append([tuple(order) for order in json.loads(done.stdout)])
    here = [gold_moving_shuffle(i, n, g) for i, n, g in keys]
    assert runs[0] == runs[1] == here
    for (_, n, gold), order in zip(keys, here, strict=True):
        assert sorted(order) == list(range(n)) and order.index(gold) != gold
    assert len({order for order, (_, n, _) in zip(here, keys, strict=True) if n == 4}) > 10, "shuffles must vary"


MMSTAR_QUESTION = "How many apples are there?\nOptions: A: one, B: two, C: three, D: four"


REALWORLDQA_QUESTION = "Which way?\nA. left\nB. right\nC. straight ahead\nPlease answer with only the letter."


def test_reordered_questions_list_the_options_in_the_new_order():
    mmstar = reorder_question("mmstar", "m1", MMSTAR_QUESTION, ["one", "two", "three", "four"], (2, 0, 3, 1))
    assert mmstar == "How many apples are there?\nOptions: A: three, B: one, C: four, D: two"
    realworldqa = reorder_question("realworldqa", "r1", REALWORLDQA_QUESTION, ["left", "right", "straight ahead"],
                                   (1, 2, 0))  # fmt: skip
    assert realworldqa == "Which way?\nA. right\nB. straight ahead\nC. left\nPlease answer with only the letter."


def test_a_question_that_does_not_list_its_options_is_refused():
    with pytest.raises(PerturbedSetError, match="mmstar item m7: the question text does not list"):
        reorder_question("mmstar", "m7", MMSTAR_QUESTION, ["one", "two", "three", "five"], (1, 0, 2, 3))
    with pytest.raises(PerturbedSetError, match="not naturalbench"):
        reorder_question("naturalbench", "n1", "Is it a cat?", ["Yes", "No"], (1, 0))


def test_circular_eval_leaves_out_options_that_name_option_letters():
    """VLMEvalKit's rule, case by case, and on the paper authors' released TSVs."""
    assert names_option_letters(["cat", "dog", "A and B", "none"])  # two letters named in one option
    assert names_option_letters(["cat", "B", "dog", "bird"])  # an option that is a letter
    assert names_option_letters(["AB", "x", "y", "z"])  # a run of the alphabet, as VLMEvalKit reads it
    assert not names_option_letters(["Option A", "a and b", "A cat", "E and F"])  # one letter; lower case; no D+
    tables = {name: read_tsv(RELEASE / f"{name}_pert_local.tsv") for name in ("MMStar", "RealWorldQA")}
    counts = {name: sum(names_option_letters(row_options(row)) for _, row in table.iterrows())
              for name, table in tables.items()}  # fmt: skip
    assert counts == {"MMStar": 117, "RealWorldQA": 1}  # MMStar: 117 of 1500, the figure VLMEvalKit's tool gives


def test_an_item_left_out_counts_by_its_one_answer():
    from lmms_contam.detectors.circular import circular_signal as circular

    def record(item, variant, correct):
        return ContamRecord("mmstar", item, item, variant, correct, n_options=2)

    records = [record("a", "rotation0", 1), record("a", "rotation1", 0), record("b", UNROTATED, 1),
               record("c", UNROTATED, 0)]  # fmt: skip
    signal = circular(records)
    assert (signal.n_items, signal.n_excluded, signal.n_changed) == (3, 2, 1)
    assert (signal.reference, signal.score) == pytest.approx((2 / 3, 1 / 3))


def _rotated(model: dict[str, tuple[int, ...]]) -> list[ContamRecord]:
    """Records of a CircularEval run: per item its answers in rotations 0, 1, 2 (one answer: asked unrotated)."""
    return [
        ContamRecord("mmstar", item, item, UNROTATED if len(answers) == 1 else f"rotation{r}", correct, 3)
        for item, answers in model.items()
        for r, correct in enumerate(answers)
    ]


def test_circular_eval_against_a_clean_reference_counts_the_drop_beyond_its_own():
    """Each model loses an item to rotation when it is right in order and not in every rotation; the signal is
    the difference of the two models' drops on the items both ran, with exact McNemar on the per-item losses."""
    from lmms_contam.detectors.circular import against_reference, circular_signal

    reference = {"a": (1, 1, 1), "b": (1, 0, 1), "c": (0, 0, 1), "d": (1, 1, 1), "e": (1,), "f": (1, 1, 0),
                 "g": (0, 1, 1), "h": (1, 1, 1)}  # fmt: skip
    model = {"a": (1, 0, 1), "b": (1, 1, 1), "c": (1, 1, 0), "d": (1, 1, 0), "e": (0,), "f": (1, 0, 0),
             "g": (1, 1, 1), "h": (1, 0, 0), "i": (1, 0, 1)}  # fmt: skip
    signal = against_reference(_rotated(model), _rotated(reference), "clean-ref")
    shared = sorted(reference)  # "i" is the model's alone: left out
    lost = {name: [int(run[i][0] == 1 and not all(run[i])) for i in shared]
            for name, run in (("model", model), ("reference", reference))}  # fmt: skip
    assert lost == {"model": [1, 0, 1, 1, 0, 1, 0, 1], "reference": [0, 1, 0, 0, 0, 1, 0, 0]}
    assert (signal.n_items, signal.n_changed, signal.n_excluded, signal.baseline) == (8, 5, 1, "clean-ref")
    assert (signal.reference, signal.score) == pytest.approx((-2 / 8, -5 / 8))
    assert signal.signal == pytest.approx(-3 / 8)
    assert signal.p_value == pytest.approx(binomtest(4, 5).pvalue) and not signal.flagged(0.05)
    # The drops are each model's own CircularEval drop on the shared items, plain averages.
    for run, drop in ((model, signal.score), (reference, signal.reference)):
        own = circular_signal(_rotated({i: run[i] for i in shared}), averages_strata=False)
        assert own.signal == pytest.approx(drop)
    # Against itself nothing is lost; a model that loses 12 items the reference keeps is flagged.
    assert against_reference(_rotated(reference), _rotated(reference), "self").signal == 0.0
    many = {f"x{k}": (1, 0, 1) for k in range(12)}
    kept = {f"x{k}": (1, 1, 1) for k in range(12)}
    flagged = against_reference(_rotated(many), _rotated(kept), "clean-ref")
    assert flagged.p_value == pytest.approx(binomtest(12, 12).pvalue) and flagged.flagged(0.05)


def test_above_chance_p_is_the_exact_tail():
    outcomes = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0]
    assert stats.above_chance_p(outcomes, [0.25] * 12) == pytest.approx(
        binomtest(sum(outcomes), 12, 0.25, alternative="greater").pvalue
    )
    chance = [0.5, 0.25, 1 / 3, 0.25, 0.5, 0.2, 1 / 3, 0.25]
    hits = 5
    tail = sum(
        np.prod([p if right else 1 - p for right, p in zip(pattern, chance, strict=True)])
        for pattern in itertools.product((0, 1), repeat=len(chance))
        if sum(pattern) >= hits
    )
    assert stats.above_chance_p([1] * hits + [0] * (len(chance) - hits), chance) == pytest.approx(tail)


def test_flags_point_the_right_way():
    drop = DetectorSignal(CIRCULAR, 100, 0.8, 0.6, 0.001, 20)
    gain = DetectorSignal(TEXT_ONLY, 100, 0.25, 0.45, 0.001, 45, flags_a_gain=True)
    assert drop.flagged() and gain.flagged()
    assert not DetectorSignal(OPTION_SHUFFLE, 100, 0.6, 0.8, 0.001, 0).flagged()
    assert not DetectorSignal(TEXT_ONLY, 100, 0.25, 0.10, 0.001, 10, flags_a_gain=True).flagged()
    assert not DetectorSignal(CIRCULAR, 100, 0.8, 0.7, 0.2, 10).flagged()


def test_a_host_s_plain_mean_and_macro_average_give_their_own_accuracies():
    """lmms-eval's MMStar averages its categories; VLMEvalKit's Overall is a plain mean: the detector's
    accuracies follow the run's host, from the same records."""
    from lmms_contam.detectors.option_shuffle import shuffle_signal

    # Category "a": 3 items, all right in the original order; "b": 1 item, wrong. Shuffled: the first of "a" lost.
    answers = {"a0": ("a", 1, 0), "a1": ("a", 1, 1), "a2": ("a", 1, 1), "b0": ("b", 0, 0)}
    records = [
        ContamRecord("mmstar", item, item, variant, correct, 4, stratum=stratum)
        for item, (stratum, original, shuffled) in answers.items()
        for variant, correct in (("original_order", original), ("shuffled", shuffled))
    ]
    macro, plain = shuffle_signal(records), shuffle_signal(records, averages_strata=False)
    assert (macro.reference, macro.score) == pytest.approx((0.5, 1 / 3))  # (1 + 0) / 2, (2/3 + 0) / 2
    assert (plain.reference, plain.score) == pytest.approx((0.75, 0.5))  # 3 / 4, 2 / 4
    assert macro.n_changed == plain.n_changed == 1
