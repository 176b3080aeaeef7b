"""The plugin's tasks through the real `lmms-eval` CLI, offline, with known-answer models.

Expected values are computed here from the fixture rows, not by the plugin's code; only the CI
bounds are checked against `lmms_contam.stats` (a bootstrap has no closed form to compare with).
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import datasets
import pytest
from helpers.benchmark_fixtures import MMSTAR_CATEGORIES, fixture_of, set_rows_of
from helpers.fixtures import answers_right, point_at_sets, real_photos, write_hub_copy
from helpers.harness import (
    BUILTIN_TASKS,
    builtins_by_reply,
    metric,
    run_lmms_eval,
    run_lmms_eval_together,
)
from scipy.stats import binomtest

from lmms_contam import stats
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.registry.specs import perturbable
from lmms_contam.schema import features_for

ROWS = set_rows_of(perturbable())  # every benchmark with a perturbed set built from hub rows
ALL_TASKS = [f"{b}_{v}" for b in ROWS for v in ("original", "perturbed", "contam")]


@pytest.fixture(scope="module")
def rows():
    photos = real_photos()
    return {benchmark: build(photos) for benchmark, build in ROWS.items()}


def macro(values: list[int], strata: list[str]) -> float:
    by = defaultdict(list)
    for v, s in zip(values, strata, strict=True):
        by[s].append(v)
    return sum(sum(v) / len(v) for v in by.values()) / len(by)


def naturalbench_expected(rows: list[dict], correct: list[int]) -> dict[str, float]:
    by_group = defaultdict(dict)
    for row, c in zip(rows, correct, strict=True):
        by_group[row["group_id"]][row["group_slot"]] = c
    g = [all(s.values()) for s in by_group.values()]
    q = [s[a] and s[b] for s in by_group.values() for a, b in (("q0_i0", "q0_i1"), ("q1_i0", "q1_i1"))]
    i = [s[a] and s[b] for s in by_group.values() for a, b in (("q0_i0", "q1_i0"), ("q0_i1", "q1_i1"))]
    return {"naturalbench_ACC": sum(correct) / len(correct), "naturalbench_G_ACC": sum(g) / len(g),
            "naturalbench_Q_ACC": sum(q) / len(q), "naturalbench_I_ACC": sum(i) / len(i)}  # fmt: skip


def mme_expected(rows: list[dict], correct: list[int]) -> dict[str, float]:
    """MME's score: per category, the mean over image pairs of acc + acc+ in percent; summed per kind."""
    pairs = defaultdict(list)
    for row, c in zip(rows, correct, strict=True):
        pairs[row["category"], row["group_id"]].append(c)
    by_category = defaultdict(list)
    for (category, _), pair in pairs.items():
        by_category[category].append(50 * sum(pair) + 100 * all(pair))
    score = {category: sum(v) / len(v) for category, v in by_category.items()}
    return {"mme_perception_score": score["existence"], "mme_cognition_score": score["commonsense_reasoning"]}


def check_all_metrics(run, rows, respond) -> None:
    """Every metric of every task equals the value computed from the fixture and the responses."""
    for benchmark, bench_rows in rows.items():
        correct = {
            v: [answers_right(benchmark, r, respond(r, v), v) for r in bench_rows] for v in ("original", "perturbed")
        }
        for variant, values in correct.items():
            task = f"{benchmark}_{variant}"
            if benchmark == "mmstar":
                strata = [r["l2_category"] for r in bench_rows]
                assert metric(run, task, "average") == pytest.approx(macro(values, strata))
                for category in MMSTAR_CATEGORIES:
                    keep = [k for k, r in enumerate(bench_rows) if r["category"] == category]
                    expected = macro([values[k] for k in keep], [strata[k] for k in keep])
                    assert metric(run, task, category) == pytest.approx(expected), (task, category)
            elif benchmark in ("realworldqa", "scienceqa", "ai2d"):
                assert metric(run, task, "exact_match") == pytest.approx(sum(values) / len(values))
            elif benchmark == "mmmu":  # one subject: its accuracy
                assert metric(run, task, "mmmu_acc") == pytest.approx(sum(values) / len(values))
            elif benchmark == "seedbench":  # image items only: both of its scores are their accuracy
                for name in ("seed_image", "seed_all"):
                    assert metric(run, task, name) == pytest.approx(sum(values) / len(values)), (task, name)
                assert "seed_video,none" not in run.results["results"][task]
            elif benchmark == "mme":
                for name, expected in mme_expected(bench_rows, values).items():
                    assert metric(run, task, name) == pytest.approx(expected), (task, name)
            elif benchmark == "mmbench":  # the static matching's overall accuracy, in percent
                assert metric(run, task, "gpt_eval_score") == pytest.approx(100 * sum(values) / len(values)), task
            else:
                for name, expected in naturalbench_expected(bench_rows, values).items():
                    assert metric(run, task, name) == pytest.approx(expected), (task, name)
        task = f"{benchmark}_contam"
        a, b = correct["original"], correct["perturbed"]
        strata = [r["l2_category"] for r in bench_rows] if benchmark == "mmstar" else None
        acc_a = macro(a, strata) if strata else sum(a) / len(a)
        acc_b = macro(b, strata) if strata else sum(b) / len(b)
        r2w = sum(x and not y for x, y in zip(a, b, strict=True))
        w2r = sum(y and not x for x, y in zip(a, b, strict=True))
        assert metric(run, task, "acc_original") == pytest.approx(acc_a)
        assert metric(run, task, "acc_perturbed") == pytest.approx(acc_b)
        assert metric(run, task, "delta") == pytest.approx(acc_b - acc_a)
        assert metric(run, task, "n_pairs") == len(bench_rows)
        assert metric(run, task, "n_flagged") == r2w
        expected_p = binomtest(r2w, r2w + w2r, 0.5).pvalue if r2w + w2r else 1.0
        assert metric(run, task, "mcnemar_p") == pytest.approx(expected_p)
        ref = stats.compare_paired([r["item_id"] for r in bench_rows], a, b, strata)
        assert metric(run, task, "delta_ci_low") == pytest.approx(ref.ci_low)
        assert metric(run, task, "delta_ci_high") == pytest.approx(ref.ci_high)
        assert ref.ci_low <= acc_b - acc_a <= ref.ci_high
        # Every sample line carries the ids a later tool joins on.
        for line in run.samples[task]:
            ids = line["contam_ids"]
            assert {"item_id", "original_id", "variant", "correct", "benchmark"} <= set(ids)
        assert {(s["contam_ids"]["item_id"], s["contam_ids"]["variant"]) for s in run.samples[task]} == {
            (r["item_id"], v) for r in bench_rows for v in ("original", "perturbed")
        }


BUILTIN_COMPARED = builtins_by_reply("B")


@pytest.fixture(scope="module")
def runs(fixture_sets, rows, tmp_path_factory) -> dict:
    """Every run these tests read, in one lmms-eval process (each its own output folder): the known-answer models
    on every task, lmms-eval's own tasks beside ours, and MMMU's draws with and without the built-in task."""
    folder = tmp_path_factory.mktemp("harness-runs")
    include = str(builtin_tasks_on(rows, [b for found in BUILTIN_COMPARED.values() for b in found], folder))
    compared = lambda response: ",".join(  # noqa: E731
        f"{b}_{kind}" for b in BUILTIN_COMPARED[response] for kind in ("builtin_local", "perturbed")
    )
    together = {"model": "dummy", "model_args": "response=Yes", "include_path": include}
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_at_sets(monkeypatch, fixture_sets)
        return run_lmms_eval_together(
            {
                "dummy": {"model": "dummy", "model_args": "response=A", "tasks": ",".join(ALL_TASKS)},
                "oracle": {"model": "contam_test_oracle", "tasks": ",".join(ALL_TASKS)},
                "memoriser": {
                    "model": "contam_test_memoriser",
                    "tasks": "contam_paired," + ",".join(f"{b}_perturbed" for b in rows),
                },
                **{
                    f"builtin-{response}": {
                        **together,
                        "model_args": f"response={response}",
                        "tasks": compared(response),
                    }
                    for response in BUILTIN_COMPARED
                },
                "mmmu-together": {**together, "tasks": "mmmu_builtin_local,mmmu_original,mmmu_perturbed"},
                "mmmu-alone": {"model": "dummy", "model_args": "response=Yes", "tasks": "mmmu_perturbed"},
            },
            folder,
        )


def test_dummy_model_every_metric_matches_the_fixture(runs, rows):
    check_all_metrics(runs["dummy"], rows, lambda row, variant: "A")


def test_oracle_holds_and_memoriser_drops(runs, rows):
    oracle = runs["oracle"]
    check_all_metrics(oracle, rows, lambda row, v: row["new_answer"] if v == "perturbed" else row["original_answer"])
    for benchmark in rows:
        assert metric(oracle, f"{benchmark}_contam", "acc_original") == 1.0
        assert metric(oracle, f"{benchmark}_contam", "acc_perturbed") == 1.0
        assert metric(oracle, f"{benchmark}_contam", "delta") == 0.0
    for benchmark in rows:
        task = f"{benchmark}_contam"
        assert metric(runs["memoriser"], task, "acc_original") == 1.0
        assert metric(runs["memoriser"], task, "acc_perturbed") == 0.0


def builtin_tasks_on(rows: dict[str, list[dict]], benchmarks: list[str], folder: Path) -> Path:
    """An --include_path folder of lmms-eval's own task of each benchmark (`<benchmark>_builtin_local`), pointed
    at the perturbed versions of the fixture's items."""
    include = folder / "include"
    include.mkdir()
    for benchmark in benchmarks:
        path = write_hub_copy(benchmark, rows[benchmark], "perturbed", folder / f"{benchmark}_builtin.parquet")
        (include / f"{benchmark}_builtin_local.yaml").write_text(
            f"include: {BUILTIN_TASKS / BINDINGS[benchmark].builtin_yaml}\ntask: {benchmark}_builtin_local\n"
            f"dataset_path: parquet\ndataset_name: null\ndataset_kwargs:\n  data_files:\n"
            f"    {fixture_of(benchmark).builtin_split}: {path}\n"
        )
    return include


@pytest.mark.parametrize("response", BUILTIN_COMPARED)
def test_perturbed_tasks_score_as_the_builtin_tasks(runs, rows, response):
    """lmms-eval's own task of each benchmark, pointed at the same items, gives the same metrics and prompts."""
    benchmarks, run = BUILTIN_COMPARED[response], runs[f"builtin-{response}"]
    for benchmark in benchmarks:
        expected = [int(r["new_answer"] == response) for r in rows[benchmark]]
        assert 0 < sum(expected) < len(expected), f"{benchmark}: the fixture must give a mixed score"
    for benchmark in benchmarks:
        for name in fixture_of(benchmark).builtin_metrics:
            ours = metric(run, f"{benchmark}_perturbed", name)
            theirs = run.results["results"][f"{benchmark}_builtin_local"][
                f"{name},{fixture_of(benchmark).builtin_filter}"
            ]
            assert ours == theirs, (benchmark, name)
        prompts = [s["input"] for s in run.samples[f"{benchmark}_perturbed"]]
        assert len(prompts) == len(rows[benchmark]) and prompts == [
            s["input"] for s in run.samples[f"{benchmark}_builtin_local"]
        ]
    if "mmstar" in benchmarks:  # MMStar's post-prompt, as its built-in task writes it
        prompts = [s["input"] for s in run.samples["mmstar_perturbed"]]
        assert all(p.endswith("Answer with the option's letter from the given choices directly") for p in prompts)


def test_mmmu_scores_a_reply_naming_no_letter_by_a_draw_of_the_document_alone(runs, rows):
    """MMMU's parser draws a letter from Python's global `random` for a reply that names none ("Yes"): the
    plugin's draw is seeded from the document's id and version, so a run holding the built-in task too (whose
    draws moved the global state) scores each document as a run of the plugin's task alone does."""
    together, alone = runs["mmmu-together"], runs["mmmu-alone"]

    def correctness(run, task: str) -> dict[str, int]:
        return {line["contam_ids"]["item_id"]: line["contam_ids"]["correct"] for line in run.samples[task]}

    def drawn(row: dict, variant: str) -> int:
        random.seed(stats.stable_seed(row["item_id"], variant))
        gold = row["new_answer"] if variant == "perturbed" else row["original_answer"]
        return int(random.choice(["A", "B", "C", "D"]) == gold)

    for variant in ("original", "perturbed"):
        expected = {row["item_id"]: drawn(row, variant) for row in rows["mmmu"]}
        assert correctness(together, f"mmmu_{variant}") == expected, variant
        accuracy = sum(expected.values()) / len(expected)
        assert metric(together, f"mmmu_{variant}", "mmmu_acc") == pytest.approx(accuracy, abs=1e-5)  # rounded by it
    assert correctness(alone, "mmmu_perturbed") == correctness(together, "mmmu_perturbed")
    assert 0 < sum(correctness(together, "mmmu_original").values()) < len(rows["mmmu"]), "draws that all agree"


def test_limit_works_on_naturalbench_by_group_id(with_sets, tmp_path):
    """The built-in naturalbench asserts all 7600 rows; ours scores whatever subset it gets."""
    run = run_lmms_eval(
        ["--model", "contam_test_oracle", "--tasks", "naturalbench_perturbed,naturalbench_contam", "--limit", "5"],
        tmp_path,
    )
    assert metric(run, "naturalbench_perturbed", "naturalbench_G_ACC") == 1.0
    assert metric(run, "naturalbench_perturbed", "naturalbench_ACC") == 1.0
    assert metric(run, "naturalbench_contam", "n_pairs") == 2  # 5 interleaved docs = 2 whole pairs + 1 half
    assert "scored in only some of their versions" in run.output


def test_missing_set_message_is_visible(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_HOME", str(tmp_path / "home"))  # whatever other tests imported
    run = run_lmms_eval(["--model", "dummy", "--tasks", "mmstar_perturbed"], tmp_path)
    assert "no perturbed set for 'mmstar'" in run.output
    assert "$LMMS_CONTAM_DATASET_MMSTAR: not set" in run.output
    assert "lmms-contam fetch mm-perturb --benchmark mmstar" in run.output  # HF_HUB_OFFLINE: no download
    assert "mmstar_perturbed" not in run.results.get("results", {})


def test_bad_set_message_names_the_row(rows, tmp_path, monkeypatch):
    bad = [dict(r) for r in rows["realworldqa"]]
    bad[4]["item_id"] = bad[1]["item_id"]
    path = tmp_path / "bad.parquet"
    datasets.Dataset.from_list(bad, features=features_for("realworldqa")).to_parquet(str(path))
    monkeypatch.setenv("LMMS_CONTAM_DATASET_REALWORLDQA", str(path))
    run = run_lmms_eval(["--model", "dummy", "--tasks", "realworldqa_contam"], tmp_path / "out")
    assert f"{path}: row 4 (item_id 'realworldqa-1'): duplicate item_id" in run.output
    assert "realworldqa_contam" not in run.results.get("results", {})
