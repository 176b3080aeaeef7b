"""`*_scanned` tasks: the built-in score plus contamination flags, through the real lmms-eval CLI.

The flags come from a real scan: local copies of the six benchmarks (their hub layouts, real photos)
against a corpus folder holding re-encoded copies of half the photos, embedded with the offline
embedder; MMStar also gets an image-text judge from a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import datasets
import pytest
from helpers.benchmark_copies import write_corpus_folder
from helpers.benchmark_fixtures import expected_flags, fixture_of, write_benchmark_copies
from helpers.harness import (
    BUILTIN_TASKS,
    builtins_by_reply,
    metric,
    run_lmms_eval,
    run_lmms_eval_together,
)
from helpers.loopback import LoopbackServer, completion

from lmms_contam.corpus import scan_job
from lmms_contam.corpus.embedder_configs import embedder_config
from lmms_contam.corpus.eval_sources import BenchmarkSource
from lmms_contam.corpus.ingest import embed_corpus
from lmms_contam.corpus.scan_files import ScanOutputError
from lmms_contam.flags import CLEAN, FLAGGED, UNJUDGED, UNSCANNED
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.hosts.lmms_eval.registration import tasks_dir
from lmms_contam.hosts.lmms_eval.scanned import SCANNED_METRICS, join_flags
from lmms_contam.hosts.readers import read_runs
from lmms_contam.judge.image_text_rate import judge_benchmark
from lmms_contam.llm import EndpointConfig
from lmms_contam.registry.specs import scannable
from lmms_contam.report.build import build
from lmms_contam.report.inputs import Loaded

OFFLINE = embedder_config("efficientnet-lite0")  # the scans count at its calibrated threshold
# The built-in tasks the scanned ones score as (NaturalBench's asserts all 7600 rows).
BUILTIN_YAML = {name: BUILTIN_TASKS / BINDINGS[name].builtin_yaml for name in scannable() if name != "naturalbench"}
# MMStar's scripted judge: the captions answer the even-numbered items; item 6 gets no usable reply.
ANSWERABLE_ITEMS, UNJUDGED_ITEM = {0, 2, 4, 16, 18, 20, 22}, 6


@dataclass
class Scanned:
    copies: dict[str, Path]
    scans: Path
    include: Path


def local_task(include: Path, name: str, base: Path, data: Path, split: str) -> None:
    """A task reading `base`'s YAML with its dataset replaced by a local parquet file (no hub)."""
    (include / f"{name}.yaml").write_text(
        f"include: {base}\ntask: {name}\ntag: []\ndataset_path: parquet\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    {split}: {data}\n"
    )


def judge_script(body: dict, _number: int):
    item = int(re.search(r"photo (\d+)\?", body["messages"][0]["content"])[1])
    if item == UNJUDGED_ITEM:
        return 200, completion("no verdict here"), 0.0
    verdict = {"answerable": item in ANSWERABLE_ITEMS, "caption": 1, "reason": "scripted"}
    return 200, completion(json.dumps(verdict)), 0.0


@pytest.fixture(scope="module")
def scanned(tmp_path_factory) -> Scanned:
    root = tmp_path_factory.mktemp("scanned")
    copies = write_benchmark_copies(root)
    embedder = OFFLINE.build()
    embed_corpus(write_corpus_folder(root / "images"), root / "corpus", embedder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scan_job, "EVAL_CHUNK", 5)  # the benchmarks are embedded a few images at a time
        for benchmark, path in copies.items():
            scan_job.scan_source(
                BenchmarkSource(benchmark, str(path)), root / "corpus", root / "scans", embedder, OFFLINE.threshold
            )
    with LoopbackServer(judge_script) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("JUDGE_KEY", "sk-test")
        endpoint = EndpointConfig(model="judge", base_url=server.base_url, api_key_env="JUDGE_KEY")
        judge_benchmark(root / "scans", "mmstar", originals=str(copies["mmstar"]), endpoint=endpoint)
    include = root / "include"
    include.mkdir()
    for benchmark, path in copies.items():
        split = fixture_of(benchmark).builtin_split
        local_task(include, f"{benchmark}_scanned_local", tasks_dir() / "scanned" / f"{benchmark}_scanned.yaml",
                   path, split)  # fmt: skip
        if benchmark in BUILTIN_YAML:
            local_task(include, f"{benchmark}_builtin_local", BUILTIN_YAML[benchmark], path, split)
    return Scanned(copies, root / "scans", include)


@pytest.fixture
def with_scans(scanned, monkeypatch) -> Scanned:
    monkeypatch.setenv("LMMS_CONTAM_SCANS", str(scanned.scans))
    return scanned


def run(scanned: Scanned, model: str, tasks: list[str], out: Path, *model_args: str):
    extra = ["--model_args", *model_args] if model_args else []
    return run_lmms_eval(["--model", model, *extra, "--include_path", str(scanned.include), "--tasks",
                          ",".join(tasks)], out)  # fmt: skip


SCANNED_LOCAL = [f"{b}_scanned_local" for b in scannable()]


BUILTIN_COMPARED = builtins_by_reply("A")


@pytest.fixture(scope="module")
def scanned_runs(scanned, tmp_path_factory) -> dict:
    """In one lmms-eval process, each in its own folder: the model right only on image-only flagged items and the
    oracle on every scanned task, and the dummy on lmms-eval's own tasks beside ours."""
    root = tmp_path_factory.mktemp("scanned-runs")
    on = {"include_path": str(scanned.include)}
    runs = {
        "contaminated": {**on, "model": "contam_test_contaminated", "tasks": ",".join(SCANNED_LOCAL)},
        "oracle": {**on, "model": "contam_test_oracle", "tasks": ",".join(SCANNED_LOCAL)},
        **{
            f"builtin-{response}": {
                **on,
                "model": "dummy",
                "model_args": f"response={response}",
                "tasks": ",".join(f"{b}_{kind}_local" for b in benchmarks for kind in ("builtin", "scanned")),
            }
            for response, benchmarks in BUILTIN_COMPARED.items()
        },
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LMMS_CONTAM_SCANS", str(scanned.scans))
        return run_lmms_eval_together(runs, root)


def test_a_model_right_only_on_flagged_items_shows_a_significant_gap(scanned_runs):
    done = scanned_runs["contaminated"]
    for benchmark in scannable():
        task, flags = f"{benchmark}_scanned_local", expected_flags(benchmark)
        flagged, clean = flags.count(True), flags.count(False)
        assert min(flagged, clean) >= 10, "the fixture must give both sides enough items"
        assert metric(done, task, "image_only_rate") == pytest.approx(flagged / (flagged + clean)), benchmark
        assert metric(done, task, "image_only_n_flagged") == flagged, benchmark
        assert metric(done, task, "image_only_n_clean") == clean, benchmark
        assert metric(done, task, "n_unscanned") == flags.count(None), benchmark
        assert metric(done, task, "image_only_acc_flagged") == 1.0
        assert metric(done, task, "image_only_acc_clean") == 0.0
        assert metric(done, task, "image_only_gap") == 1.0
        assert metric(done, task, "image_only_gap_ci_low") > 0.5
        assert metric(done, task, "image_only_gap_p") < 1e-4
        if benchmark != "mmstar":
            assert metric(done, task, "image_text_n_flagged") == 0
            assert metric(done, task, "image_text_rate") != metric(done, task, "image_text_rate"), "NaN: no judge"
    # The usual scores: right exactly on the flagged items.
    assert metric(done, "mmstar_scanned_local", "average") == 0.5
    assert metric(done, "seedbench_scanned_local", "seed_all") == pytest.approx(16 / 34)
    assert metric(done, "mme_scanned_local", "mme_cognition_score") == 100.0  # 2 of 4 pairs right: (100+100)/2 x2
    # MMStar's judge: 7 answerable, 1 unjudged (neither side), 24 clean; the model is right on the 8 clean
    # items whose image the corpus holds.
    task = "mmstar_scanned_local"
    assert metric(done, task, "image_text_rate") == pytest.approx(7 / 32)
    assert (metric(done, task, "image_text_n_flagged"), metric(done, task, "image_text_n_clean")) == (7, 24)
    assert metric(done, task, "n_unjudged") == 1
    assert metric(done, task, "image_text_acc_flagged") == 1.0
    assert metric(done, task, "image_text_acc_clean") == pytest.approx(8 / 24)
    # Every sample line carries its own item's flags, in the order of the benchmark's rows.
    words = {True: FLAGGED, False: CLEAN, None: UNSCANNED}
    for benchmark in scannable():
        records = [
            s["contam_ids"] for s in sorted(done.samples[f"{benchmark}_scanned_local"], key=lambda s: s["doc_id"])
        ]
        assert [r["image_only"] for r in records] == [words[f] for f in expected_flags(benchmark)], benchmark
    texts = Counter(s["contam_ids"]["image_text"] for s in done.samples["mmstar_scanned_local"])
    assert texts == {FLAGGED: 7, UNJUDGED: 1, CLEAN: 24}


def test_the_oracle_shows_no_gap(scanned_runs):
    done = scanned_runs["oracle"]
    for task in SCANNED_LOCAL:
        assert metric(done, task, "image_only_acc_flagged") == metric(done, task, "image_only_acc_clean") == 1.0
        assert metric(done, task, "image_only_gap") == 0.0
        assert metric(done, task, "image_only_gap_p") == 1.0
    assert metric(done, "mmstar_scanned_local", "image_text_gap") == 0.0


@pytest.mark.parametrize("response", BUILTIN_COMPARED)
def test_scores_equal_the_builtin_tasks_on_the_same_items(scanned_runs, response):
    done, benchmarks = scanned_runs[f"builtin-{response}"], BUILTIN_COMPARED[response]
    assert done.results, done.output[-3000:]
    for benchmark in benchmarks:
        builtin = done.results["results"][f"{benchmark}_builtin_local"]
        ours = done.results["results"][f"{benchmark}_scanned_local"]
        # By metric name: AI2D's built-in reports its score under its filter's name, the plugin's under none.
        scores = {k.split(",")[0]: v for k, v in builtin.items() if "," in k and "stderr" not in k}
        assert any(isinstance(v, float) and v > 0 for v in scores.values()), f"a non-zero score is needed: {builtin}"
        assert {k: ours[f"{k},none"] for k in scores} == scores, benchmark
        assert set(ours) >= {f"{m},none" for m in SCANNED_METRICS}
        prompts = [s["input"] for s in done.samples[f"{benchmark}_scanned_local"]]
        assert prompts == [s["input"] for s in done.samples[f"{benchmark}_builtin_local"]]


def rows_of(scanned: Scanned, benchmark: str) -> datasets.Dataset:
    split = fixture_of(benchmark).builtin_split
    return datasets.load_dataset("parquet", data_files={split: str(scanned.copies[benchmark])}, split=split)


def test_scan_at_another_threshold_is_refused(with_scans, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_SCAN_THRESHOLD", "0.9")
    with pytest.raises(ScanOutputError, match=rf"scanned at threshold {OFFLINE.threshold}, but contamination is "
                                              r"counted above 0.9"):  # fmt: skip
        join_flags(rows_of(with_scans, "mme"), "mme")


def test_scan_of_another_benchmark_version_is_refused(with_scans):
    fewer = rows_of(with_scans, "seedbench").select(range(20))
    with pytest.raises(ScanOutputError, match=r"seedbench.summary.json: made on another version of seedbench"):
        join_flags(fewer, "seedbench")


def test_judge_at_another_threshold_is_refused(with_scans, tmp_path, monkeypatch):
    scans = tmp_path / "scans"
    shutil.copytree(with_scans.scans, scans, ignore=shutil.ignore_patterns("work", "judge-cache"))
    judge = json.loads((scans / "mmstar.judge.json").read_text())
    (scans / "mmstar.judge.json").write_text(json.dumps({**judge, "threshold": 0.7}))
    monkeypatch.setenv("LMMS_CONTAM_SCANS", str(scans))
    with pytest.raises(ScanOutputError, match=r"mmstar.judge.json: judged matches above 0.7"):
        join_flags(rows_of(with_scans, "mmstar"), "mmstar")


def test_refusal_is_visible_in_the_harness_output(with_scans, tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_SCAN_THRESHOLD", "0.9")
    done = run(with_scans, "dummy", ["mmstar_scanned_local"], tmp_path)
    assert f"scanned at threshold {OFFLINE.threshold}, but contamination is counted above 0.9" in done.output
    assert "mmstar_scanned_local" not in done.results.get("results", {})


def test_missing_scan_folder_says_where_it_looked(scanned):
    with pytest.raises(ScanOutputError, match=r"no scan folder for the \*_scanned tasks") as raised:
        join_flags(rows_of(scanned, "realworldqa"), "realworldqa")
    assert "$LMMS_CONTAM_SCANS: not set" in str(raised.value) and "default folder" in str(raised.value)


def test_report_adds_the_gap_to_its_leaderboard(scanned_runs, tmp_path):
    out = scanned_runs["contaminated"].folder
    analysed, text = build(read_runs([out]), json_path=tmp_path / "report.json", html_path=tmp_path / "report.html")
    assert {r.benchmark for r in analysed.scanned} == set(scannable())
    mmstar = next(r for r in analysed.scanned if r.benchmark == "mmstar")
    # The report recomputes from the samples what the task's metrics said.
    assert (mmstar.subsets["image_only"].gap, mmstar.subsets["image_text"].n_flagged, mmstar.n_unjudged) == (1, 7, 1)
    assert mmstar.rates["image_only"] == 0.5 and mmstar.accuracy == 0.5
    header = next(line for line in text.splitlines() if line.startswith("| model | ai2d: flagged - clean"))
    assert header.count("flagged - clean") == len(scannable())
    row = next(line for line in text.splitlines() if line.startswith("| contam\\_test\\_contaminated"))
    assert row.count("image-only +100.0 (higher on contaminated items)") == len(scannable())
    # 7 answerable items: the gap is large and p small, but one side is too small for a verdict.
    assert "image-text +66.7 (too few items to say)" in row
    assert (
        "| contam\\_test\\_contaminated | mmstar | image-text | 32 | 50.0 | 21.9 | 100.0 (7) | 33.3 (24) | +66.7 ["
    ) in text
    payload = json.loads((tmp_path / "report.json").read_text())
    seed = next(r for r in payload["scanned"] if r["benchmark"] == "seedbench")
    assert (seed["n_unscanned"], seed["image_only"]["n_flagged"], seed["judged"]) == (2, 16, False)
    assert "image_text" not in seed and seed["image_only"]["verdict"] == "higher on contaminated items"
    assert "Contaminated vs clean items" in (tmp_path / "report.html").read_text()


def test_report_page_shows_the_closest_matches_side_by_side(scanned, tmp_path):
    build(Loaded([], []), scans=scanned.scans, html_path=tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    section = page.split("mmstar: closest corpus matches above 0.5")[1].split("<h3>")[0]
    # 16 of 32 items are flagged; the 12 closest are shown, each eval image beside its corpus copy.
    assert section.count('<img alt="eval"') == 12 and section.count('<img alt="corpus"') == 12
    assert "a web copy of photo" in section and "corpus match(es) above the threshold" in section
    moved = tmp_path / "moved"
    shutil.copytree(scanned.scans, moved, ignore=shutil.ignore_patterns("work", "judge-cache"))
    summary = json.loads((moved / "mmstar.summary.json").read_text())
    (moved / "mmstar.summary.json").write_text(json.dumps({**summary, "corpus": str(tmp_path / "gone")}))
    build(Loaded([], []), scans=moved, html_path=tmp_path / "moved.html")
    section = (tmp_path / "moved.html").read_text().split("mmstar: closest corpus matches")[1].split("<h3>")[0]
    assert "corpus metadata unavailable" in section and section.count('<img alt="eval"') == 12
    assert "corpus: no local image" in section
