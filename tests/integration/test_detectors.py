"""Peer detectors (CircularEval, option-order shuffle, text-only leakage, masked-option guessing) as plugin tasks.

Expected scores are worked out here from the fixture rows and each test model's rule; only the
shuffled gold letters are read back from the logged prompts, after checking the prompt shows the
item's gold option at that letter.
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from helpers.fixtures import point_at_sets
from helpers.harness import MASKED_OPTION_BENCHMARKS as MASKED
from helpers.harness import metric, run_lmms_eval_together
from PIL import Image
from scipy.stats import binomtest

from lmms_contam.detectors.base import AskedItem
from lmms_contam.detectors.circular import CIRCULAR, UNROTATED
from lmms_contam.detectors.masked_option import INSTRUCTION, MASKED_OPTION, hidden_option
from lmms_contam.detectors.option_shuffle import OPTION_SHUFFLE
from lmms_contam.detectors.options import MASK, names_option_letters
from lmms_contam.detectors.text_only import TEXT_ONLY
from lmms_contam.hosts.lmms_eval.reference_models import UNSEEN
from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.imaging import BLANK_GREY
from lmms_contam.letters import option_letters
from lmms_contam.registry.specs import SPECS, with_detectors
from lmms_contam.schema import PerturbedSetError

BENCHMARKS = with_detectors()
DETECTORS = (CIRCULAR, OPTION_SHUFFLE, TEXT_ONLY)


def test_documents_are_cached_only_for_the_code_that_shaped_them(with_sets, monkeypatch):
    from lmms_contam.hosts.lmms_eval import documents as docs
    from lmms_contam.hosts.lmms_eval import task_functions

    first = task_functions.mmstar_masked_option_docs(None)._fingerprint
    assert task_functions.mmstar_masked_option_docs(None)._fingerprint == first
    monkeypatch.setattr(docs, "package_code_digest", lambda: "another version of the plugin")
    assert task_functions.mmstar_masked_option_docs(None)._fingerprint != first


def test_masked_option_tasks_exist_where_the_prompt_can_ask_for_a_text():
    have = tuple(b for b in BENCHMARKS if (tasks_dir() / b / f"{b}_{MASKED_OPTION}.yaml").is_file())
    assert have == MASKED


def test_the_switch_rotates_the_items_left_out_too(with_sets, monkeypatch):
    from lmms_contam.hosts.lmms_eval import documents as docs
    from lmms_contam.hosts.lmms_eval import task_functions

    variants = [doc["contam_variant"] for doc in task_functions.mmstar_circular_docs(None)]
    assert variants.count(UNROTATED) == 1 and len(variants) == 11 * 4 + 1  # the fixture's one such item
    monkeypatch.setenv(docs.ROTATE_ALL_ENV, "1")
    variants = [doc["contam_variant"] for doc in task_functions.mmstar_circular_docs(None)]
    assert UNROTATED not in variants and len(variants) == 12 * 4


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
    "oracle": {"model": "contam_test_oracle"},
    "memoriser": {"model": "contam_test_memoriser"},
    "dummy": {"model": "dummy", "model_args": "response=A"},
}
OPTION_IN_PROMPT = {
    "inline": re.compile(r"(?:^|, )([A-Z]): (.*?)(?=, [A-Z]: |$)"),
    "lines": re.compile(r"^([A-Z])\. (.*)$", re.M),
}


@pytest.fixture(scope="module")
def detector_runs(fixture_sets, tmp_path_factory):
    tasks = ",".join([*(f"{b}_{d}" for b in BENCHMARKS for d in DETECTORS), *(f"{b}_{MASKED_OPTION}" for b in MASKED)])
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_at_sets(monkeypatch, fixture_sets)
        out = tmp_path_factory.mktemp("detector-runs")
        return run_lmms_eval_together({name: {**model, "tasks": tasks} for name, model in MODELS.items()}, out)


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


def shown_texts(benchmark: str, prompt: str) -> list[str]:
    """The option texts a prompt lists, in order (the letters checked A, B, ...)."""
    listed = shown_options(benchmark, prompt)
    assert list(listed) == option_letters(len(listed)), prompt
    return list(listed.values())


@pytest.mark.parametrize("model", list(MODELS))
def test_masked_option_guessing_through_lmms_eval(detector_runs, fixture_sets, model):
    """The memoriser remembers each item's hidden option; the oracle reads images but never saw the items; the
    dummy answers a letter. Each prompt shows the mask where the hidden option stood and asks for its text."""
    run = detector_runs[model]
    for benchmark in MASKED:
        rows = pd.read_parquet(fixture_sets[benchmark]).set_index("item_id")
        task = f"{benchmark}_{MASKED_OPTION}"
        named = []
        for sample in run.samples[task]:
            row = rows.loc[sample["contam_ids"]["item_id"]]
            options = list(row.options)
            gold = option_letters(len(options)).index(row.original_answer)
            hidden = hidden_option(AskedItem(row.name, tuple(options), gold))
            assert sample["contam_ids"]["gold"] == options[hidden]  # the text to name; the document's answer is
            assert sample["target"] in (option_letters(len(options))[hidden], str(hidden))  # where the mask stands
            assert INSTRUCTION.strip() in sample["input"] and "letter" not in sample["input"].rsplit(MASK, 1)[1]
            assert shown_texts(benchmark, sample["input"]) == [
                MASK if i == hidden else t for i, t in enumerate(options)
            ]
            reply = {"oracle": UNSEEN, "memoriser": options[hidden], "dummy": "A"}[model]
            logged = sample["filtered_resps"]
            assert (logged[0] if isinstance(logged, list) else logged) == reply
            named.append(int(model == "memoriser"))
        assert len(named) == len(rows)
        assert metric(run, task, "acc_masked") == pytest.approx(sum(named) / len(named))
        assert metric(run, task, "n_named") == sum(named) and metric(run, task, "n_items") == len(rows)
        chance = SPECS[benchmark].masked_option_chance
        if chance is None:  # no rate by construction: the rate alone, no p-value
            assert math.isnan(metric(run, task, "chance")) and math.isnan(metric(run, task, "masked_p"))
            continue
        p = binomtest(sum(named), len(named), chance, alternative="greater").pvalue
        assert metric(run, task, "chance") == pytest.approx(chance)
        assert metric(run, task, "masked_p") == pytest.approx(p)
        # Caught exactly when it remembers the items, where the hidden option cannot be known without them (the
        # fixed benchmark lists one kind's names in one order: a model that never saw an item knows them all).
        assert (p < 0.01) == (model == "memoriser" and chance < 1)
