"""Peer detectors (CircularEval, option-order shuffle, text-only leakage) as plugin tasks.

Expected scores are worked out here from the fixture rows and each test model's rule; only the
shuffled gold letters are read back from the logged prompts, after checking the prompt shows the
item's gold option at that letter.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from conftest import metric, point_at_sets, run_lmms_eval
from fixtures import RELEASE
from PIL import Image
from scipy.stats import binomtest

from lmms_contam import stats
from lmms_contam.benchmarks.mm_perturb import read_tsv, row_options
from lmms_contam.detectors.circular import CIRCULAR, UNROTATED
from lmms_contam.detectors.option_shuffle import OPTION_SHUFFLE
from lmms_contam.detectors.options import gold_moving_shuffle, names_option_letters, reorder_question, rotations
from lmms_contam.detectors.signals import DetectorSignal
from lmms_contam.detectors.text_only import TEXT_ONLY
from lmms_contam.imaging import BLANK_GREY
from lmms_contam.letters import option_letters
from lmms_contam.records import ContamRecord
from lmms_contam.registry.specs import SPECS, WITH_DETECTORS
from lmms_contam.schema import PerturbedSetError

BENCHMARKS = WITH_DETECTORS
DETECTORS = (CIRCULAR, OPTION_SHUFFLE, TEXT_ONLY)


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


def test_the_switch_rotates_the_items_left_out_too(with_sets, monkeypatch):
    from lmms_contam.hosts.lmms_eval import documents as docs
    from lmms_contam.hosts.lmms_eval import task_functions

    variants = [doc["contam_variant"] for doc in task_functions.mmstar_circular_docs(None)]
    assert variants.count(UNROTATED) == 1 and len(variants) == 11 * 4 + 1  # the fixture's one such item
    monkeypatch.setenv(docs.ROTATE_ALL_ENV, "1")
    variants = [doc["contam_variant"] for doc in task_functions.mmstar_circular_docs(None)]
    assert UNROTATED not in variants and len(variants) == 12 * 4


def test_an_item_left_out_counts_by_its_one_answer():
    from lmms_contam.detectors.circular import signal as circular

    def record(item, variant, correct):
        return ContamRecord("mmstar", item, item, variant, correct, n_options=2)

    records = [record("a", "rotation0", 1), record("a", "rotation1", 0), record("b", UNROTATED, 1),
               record("c", UNROTATED, 0)]  # fmt: skip
    signal = circular(records)
    assert (signal.n_items, signal.n_excluded, signal.n_changed) == (3, 2, 1)
    assert (signal.reference, signal.score) == pytest.approx((2 / 3, 1 / 3))


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


def test_text_only_documents_show_a_blank_canvas_of_the_original_size(with_sets):
    from lmms_contam.hosts.lmms_eval import task_functions

    rows = pd.read_parquet(with_sets["mmstar"])
    text_only = task_functions.mmstar_text_only_docs(None)
    assert len(text_only) == len(rows)
    for doc, row in zip(text_only, rows.itertuples(), strict=True):
        original = Image.open(io.BytesIO(row.original_image["bytes"]))
        blank = np.asarray(doc["image"].convert("RGB"))
        assert doc["image"].size == original.size
        assert (blank == np.array(BLANK_GREY)).all()
        assert doc["question"] == row.question and doc["answer"] == row.original_answer
        assert doc["contam_text_only_input"] == "blank" and len(task_functions.mmstar_text_only_visual(doc)) == 1


def test_text_only_documents_carry_no_image_when_asked(with_sets, monkeypatch):
    from lmms_contam.hosts.lmms_eval import documents as docs
    from lmms_contam.hosts.lmms_eval import task_functions

    monkeypatch.setenv(docs.TEXT_ONLY_IMAGE_ENV, "none")
    text_only = task_functions.mmstar_text_only_docs(None)
    assert all(doc["image"] is None and doc["contam_text_only_input"] == "none" for doc in text_only)
    assert task_functions.mmstar_text_only_visual(text_only[0]) == []
    monkeypatch.setenv(docs.TEXT_ONLY_IMAGE_ENV, "sometimes")
    with pytest.raises(PerturbedSetError, match="LMMS_CONTAM_TEXT_ONLY_IMAGE .* got 'sometimes'"):
        task_functions.mmstar_text_only_docs(None)


# --- through the real lmms-eval CLI ---------------------------------------------------------------

MODELS = {
    "oracle": ["--model", "contam_test_oracle"],
    "memoriser": ["--model", "contam_test_memoriser"],
    "dummy": ["--model", "dummy", "--model_args", "response=A"],
}
OPTION_IN_PROMPT = {
    "inline": re.compile(r"(?:^|, )([A-Z]): (.*?)(?=, [A-Z]: |$)"),
    "lines": re.compile(r"^([A-Z])\. (.*)$", re.M),
}


@pytest.fixture(scope="module")
def detector_runs(fixture_sets, tmp_path_factory):
    tasks = ",".join(f"{b}_{d}" for b in BENCHMARKS for d in DETECTORS)
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_at_sets(monkeypatch, fixture_sets)
        out = tmp_path_factory.mktemp("detector-runs")
        return {name: run_lmms_eval([*args, "--tasks", tasks], out / name) for name, args in MODELS.items()}


def shown_options(benchmark: str, prompt: str) -> dict[str, str]:
    if SPECS[benchmark].option_layout != "inline":  # RealWorldQA's question, SEED-Bench's prompt: "A. x" lines
        return dict(OPTION_IN_PROMPT["lines"].findall(prompt))
    listed = prompt.split("\nOptions: ", 1)[1].split("\n", 1)[0]
    return dict(OPTION_IN_PROMPT["inline"].findall(listed))


def logged_versions(run, benchmark: str, detector: str, rows: pd.DataFrame) -> dict[str, dict[str, str]]:
    """{item: {variant: gold letter}}, after checking every prompt shows the item's gold option there."""
    by_id = rows.set_index("item_id")
    versions: dict[str, dict[str, str]] = defaultdict(dict)
    for sample in run.samples[f"{benchmark}_{detector}"]:
        ids, target = sample["contam_ids"], sample["target"]
        row = by_id.loc[ids["item_id"]]
        gold_text = row.options[option_letters(len(row.options)).index(row.original_answer)]
        assert shown_options(benchmark, sample["input"])[target] == gold_text, sample["input"]
        versions[ids["item_id"]][ids["variant"]] = target
    return versions


def macro_or_mean(values: list[int], strata: list[str] | None) -> float:
    if strata is None:
        return float(np.mean(values))
    by: dict[str, list[int]] = defaultdict(list)
    for value, stratum in zip(values, strata, strict=True):
        by[stratum].append(value)
    return float(np.mean([np.mean(v) for v in by.values()]))


def mcnemar(before: list[int], after: list[int]) -> tuple[float, int]:
    lost = sum(b and not a for b, a in zip(before, after, strict=True))
    gained = sum(a and not b for b, a in zip(before, after, strict=True))
    return (binomtest(lost, lost + gained, 0.5).pvalue if lost + gained else 1.0), lost


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_detector_scores_through_lmms_eval(detector_runs, fixture_sets, model):
    run = detector_runs[model]
    answer = {
        "oracle": lambda gold, original: gold,
        "memoriser": lambda gold, original: original,
        "dummy": lambda gold, original: "A",
    }[model]
    for benchmark in BENCHMARKS:
        rows = pd.read_parquet(fixture_sets[benchmark]).sort_values("item_id").reset_index(drop=True)
        strata = list(rows["l2_category"]) if SPECS[benchmark].stratified else None
        ids, originals = list(rows["item_id"]), list(rows["original_answer"])

        circular = logged_versions(run, benchmark, CIRCULAR, rows)
        excluded = 0
        for item, row in zip(ids, rows.itertuples(), strict=True):
            if names_option_letters(list(row.options)):  # asked once, in its own order (VLMEvalKit's rule)
                assert circular[item] == {UNROTATED: row.original_answer}
                excluded += 1
                continue
            golds = [circular[item][f"rotation{r}"] for r in range(len(row.options))]
            assert sorted(golds) == option_letters(len(row.options)), "every rotation puts the gold elsewhere"
            assert golds[0] == row.original_answer
        assert excluded == (1 if benchmark == "mmstar" else 0)  # the fixture's one such item
        vanilla = [int(answer(o, o) == o) for o in originals]
        every = [int(all(answer(g, o) == g for g in circular[i].values())) for i, o in zip(ids, originals, strict=True)]
        p, lost = mcnemar(vanilla, every)
        task = f"{benchmark}_circular"
        assert metric(run, task, "acc_vanilla") == pytest.approx(macro_or_mean(vanilla, strata))
        assert metric(run, task, "acc_circular") == pytest.approx(macro_or_mean(every, strata))
        assert metric(run, task, "circular_drop") == pytest.approx(
            macro_or_mean(every, strata) - macro_or_mean(vanilla, strata)
        )
        assert metric(run, task, "circular_p") == pytest.approx(p)
        assert metric(run, task, "n_inconsistent") == lost
        assert metric(run, task, "n_items") == len(rows)
        assert metric(run, task, "n_excluded") == excluded

        shuffled = logged_versions(run, benchmark, OPTION_SHUFFLE, rows)
        moved = [shuffled[i]["shuffled"] for i in ids]
        assert all(gold != o for gold, o in zip(moved, originals, strict=True)), "the gold must move"
        after = [int(answer(gold, o) == gold) for gold, o in zip(moved, originals, strict=True)]
        p, lost = mcnemar(vanilla, after)
        task = f"{benchmark}_option_shuffle"
        assert metric(run, task, "acc_original") == pytest.approx(macro_or_mean(vanilla, strata))
        assert metric(run, task, "acc_shuffled") == pytest.approx(macro_or_mean(after, strata))
        assert metric(run, task, "shuffle_p") == pytest.approx(p)
        assert metric(run, task, "n_flipped") == lost

        right = sum(vanilla)  # the text-only documents ask the original question with the original gold
        n_options = {len(o) for o in rows["options"]}
        assert len(n_options) == 1, "the fixtures give every item of a benchmark the same number of options"
        chance = 1 / n_options.pop()
        task = f"{benchmark}_text_only"
        assert metric(run, task, "acc_text_only") == pytest.approx(right / len(rows))
        assert metric(run, task, "chance") == pytest.approx(chance)
        assert metric(run, task, "text_only_excess") == pytest.approx(right / len(rows) - chance)
        assert metric(run, task, "text_only_p") == pytest.approx(
            binomtest(right, len(rows), chance, alternative="greater").pvalue
        )
        assert metric(run, task, "n_right") == right
    if model == "dummy":
        assert 0 < metric(run, "mmstar_option_shuffle", "acc_shuffled") < 1, "the fixture must give a mixed score"
