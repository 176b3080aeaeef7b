"""The second host: sets exported as VLMEvalKit datasets, VLMEvalKit itself (`python -m vlmeval`, its
OpenAI-API model against a loopback server) running them, and the report reading its work dir."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pandas as pd
import pytest
from helpers.harness import run_lmms_eval
from helpers.inspect_cli import inspect_eval
from helpers.loopback import LoopbackServer
from helpers.loopback_vlm import ScriptedVLM, Shown, shown_in_export, shown_in_versions, thumbnail, view_of
from loguru import logger

from lmms_contam import stats
from lmms_contam.cli import main
from lmms_contam.detectors.options import gold_letter, rotations
from lmms_contam.hosts.vlmevalkit.bindings import CIRCULAR_NAMES, REFUSED, dataset_name, exportable
from lmms_contam.hosts.vlmevalkit.export import families
from lmms_contam.hosts.vlmevalkit.hits import rechecked
from lmms_contam.hosts.vlmevalkit.prompt import INSTRUCTION, mcq_prompt
from lmms_contam.hosts.vlmevalkit.result_files import ResultFile
from lmms_contam.hosts.vlmevalkit.row_content import content_index
from lmms_contam.registry.specs import SPECS, perturbable
from lmms_contam.report.inputs import ReportInputError
from lmms_contam.schema import manifest_beside

DATASETS = ("MMStar_contam", "MMStar_contam_option_shuffle", "MMStar_contam_text_only")
MODELS = ("oracle", "memoriser", "wrong", "random")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def vlmeval(lmudata: Path, work: Path, base_url: str, data: tuple[str, ...], models: tuple[str, ...],
            judge: str = "exact_matching") -> subprocess.CompletedProcess:  # fmt: skip
    """VLMEvalKit's own command line, as its README runs it, on the loopback server."""
    command = [sys.executable, "-m", "vlmeval", "--data", *data, "--model", *models, "--base-url", base_url,
               "--judge", judge, "--work-dir", str(work), "--api-nproc", "2", "--retry", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LMUData": str(lmudata)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def read_tsv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


@pytest.fixture(scope="module")
def mmstar_rows(fixture_sets) -> list[dict]:
    return datasets.load_dataset("parquet", data_files=str(fixture_sets["mmstar"]), split="train").to_list()


@pytest.fixture(scope="module")
def exported(fixture_sets, tmp_path_factory) -> Path:
    """MMStar's fixture set exported in three families into one LMUData folder."""
    lmudata = tmp_path_factory.mktemp("LMUData")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
        for family in ("contam", "option_shuffle", "text_only"):
            assert main(["export", "vlmevalkit", "mmstar", "--family", family, "--lmudata", str(lmudata)]) == 0
    return lmudata


@pytest.fixture(scope="module")
def work_dir(exported, mmstar_rows, tmp_path_factory) -> tuple[Path, ScriptedVLM]:
    """One VLMEvalKit run of four scripted models on the three exported datasets."""
    original = {row["item_id"]: row["original_answer"] for row in mmstar_rows}
    shown = [s for name in DATASETS for s in shown_in_export(read_tsv(exported / f"{name}.tsv"), original)]
    model = ScriptedVLM(shown)
    work = tmp_path_factory.mktemp("vlmeval-work")
    with LoopbackServer(model) as server:
        vlmeval(exported, work, server.base_url, DATASETS, MODELS)
    model.requests = server.requests
    return work, model


def test_the_export_holds_both_versions_of_every_item_as_vlmevalkit_reads_them(exported, mmstar_rows, fixture_sets):
    table = read_tsv(exported / "MMStar_contam.tsv")
    set_manifest = hashlib.sha256(manifest_beside(fixture_sets["mmstar"]).read_bytes()).hexdigest()
    assert len(table) == 2 * len(mmstar_rows) and table["index"].is_unique
    assert table["index"].tolist() == [str(content_index(row)) for row in table.to_dict("records")]
    by_item = {row["item_id"]: row for row in mmstar_rows}
    for line in table.to_dict("records"):
        row = by_item[line["contam_item_id"]]
        version = line["contam_variant"]
        assert line["split"] == version and line["contam_set_manifest"] == set_manifest
        assert line["answer"] == (row["original_answer"] if version == "original" else row["new_answer"])
        image = row["original_image"] if version == "original" else row["image"]
        assert base64.b64decode(line["image"]) == image["bytes"]  # the set's own bytes, not re-encoded
        assert line["image_path"].startswith("contam-") and line["image_path"].endswith(".png")
        assert line["question"] == "Which object is shown in the image?"  # the options are its columns
        assert [line[letter] for letter in "ABCD"] == list(row["options"])
        assert (line["category"], line["l2-category"], line["contam_stratum"]) == (
            row["category"], row["l2_category"], row["l2_category"])  # fmt: skip
    assert "image" not in read_tsv(exported / "MMStar_contam_text_only.tsv").columns
    manifest = json.loads((exported / "MMStar_contam.contam.json").read_text())
    assert (manifest["dataset"], manifest["rows"], manifest["items"]) == ("MMStar_contam", 24, 12)


def test_every_benchmark_with_sets_is_exported_or_refused_with_its_reason(capsys, tmp_path):
    assert set(perturbable()) == set(exportable()) | set(REFUSED)
    assert all(SPECS[name].columns.answer_style == "letter" for name in exportable())
    names = [dataset_name(benchmark, family) for benchmark in exportable() for family in families()]
    assert len(set(names)) == len(names)
    assert not [name for name in names if any(marker in name.lower() for marker in CIRCULAR_NAMES)]
    for benchmark in REFUSED:
        code, _, err = run_cli(capsys, "export", "vlmevalkit", benchmark, "--lmudata", tmp_path)
        assert code == 2 and f"{benchmark} cannot be exported to VLMEvalKit: " in err and "yes/no" in err
    assert not list(tmp_path.iterdir())


def test_vlmevalkit_runs_the_export_and_the_report_gives_each_model_its_verdict(work_dir, mmstar_rows, tmp_path,
                                                                              capsys):  # fmt: skip
    work, model = work_dir
    # Every version of every dataset asked once; the option shuffle's original order looks as the original does.
    assert sum(model.asked.values()) == len(MODELS) * (24 + 24 + 12)
    assert {view for _, view in model.asked} == {s.view for s in model.shown}
    code, _, err = run_cli(capsys, "report", work, "--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    results = {r["model"].removesuffix(" (VLMEvalKit)"): r for r in report["results"]}
    assert set(results) == set(MODELS) and {r["host"] for r in report["results"]} == {"VLMEvalKit"}
    assert (results["oracle"]["delta"], results["oracle"]["verdict"]) == (0.0, "no evidence")
    assert results["memoriser"]["delta"] == -1.0 and results["memoriser"]["verdict"] == "contaminated"
    assert results["memoriser"]["mcnemar_p"] < 0.01
    assert (results["wrong"]["acc_original"], results["wrong"]["acc_perturbed"]) == (0.0, 0.0)
    # Each accuracy is VLMEvalKit's own headline for the same replies: the Overall of its acc file, per split (the
    # export's split is the version), a plain mean, where lmms-eval's MMStar averages l2 categories.
    for name in MODELS:
        (acc_file,) = work.rglob(f"{name}_MMStar_contam_acc.csv")
        overall = {row["split"]: row["Overall"] for row in pd.read_csv(acc_file).to_dict("records")}
        assert results[name]["acc_original"] == pytest.approx(overall["original"]), name
        assert results[name]["acc_perturbed"] == pytest.approx(overall["perturbed"]), name
        assert results[name]["accuracy_averaged_over"] == "items"
        for side in ("original", "perturbed"):
            low, high = results[name][f"acc_{side}_ci"]
            assert 0 <= low <= results[name][f"acc_{side}"] <= high <= 1
    random_right = [int(model.policies["random"](s) == s.gold) for s in model.shown if s.variant == "original"]
    strata = {row["item_id"]: row["l2_category"] for row in mmstar_rows}
    macro = stats.accuracy(random_right, [strata[s.item_id] for s in model.shown if s.variant == "original"])
    assert results["random"]["acc_original"] == pytest.approx(sum(random_right) / len(random_right)) != macro
    assert "judge exact_matching" in results["oracle"]["answer_matching"]
    detectors = {(d["model"].removesuffix(" (VLMEvalKit)"), d["detector"]): d for d in report["detectors"]}
    assert detectors[("memoriser", "option_shuffle")]["flagged"] and detectors[("memoriser", "option_shuffle")][
        "signal"] == -1.0  # fmt: skip
    assert not detectors[("oracle", "option_shuffle")]["flagged"]
    assert detectors[("oracle", "text_only")]["score"] == 1.0 and detectors[("oracle", "text_only")]["flagged"]
    markdown = (tmp_path / "r.md").read_text()
    assert "| memoriser | mmstar | VLMEvalKit |" in markdown  # the host has a column of its own
    assert "| memoriser | memoriser (VLMEvalKit) |" in markdown
    assert "Answers matched by:" in markdown


def test_vlmevalkit_asks_with_the_prompt_the_plugin_trains_its_models_on(work_dir):
    """`hosts.vlmevalkit.prompt.mcq_prompt` is the text VLMEvalKit sends, so a model trained on it (the controlled
    experiment through VLMEvalKit) reads what it was trained to read."""
    _, model = work_dir
    for body in model.requests:
        (text,) = [part["text"] for part in body["messages"][0]["content"] if part["type"] == "text"]
        listed = lambda s: "".join(f"{letter}. {option}\n" for letter, option in zip("ABCD", s.options, strict=True))  # noqa: E731
        options = next(s.options for s in model.shown if text.endswith(listed(s) + INSTRUCTION))
        assert text == mcq_prompt("Which object is shown in the image?", options)


def _damaged(work: Path, copy: Path, name: str, damage) -> Path:
    """A copy of the work dir with one result file changed by `damage` (VLMEvalKit links the latest run's files
    into the model's folder: the links are removed, the file itself changed)."""
    if copy != work:
        shutil.copytree(work, copy, symlinks=True)
    for link in [p for p in copy.rglob(name) if p.is_symlink()]:
        link.unlink()
    (path,) = copy.rglob(name)
    damage(path)
    return path


def _truncated_xlsx(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _fewer_rows(path: Path) -> None:
    table = pd.read_excel(path)
    table.iloc[:-2].to_excel(path, index=False)


def _as_tsv_cut_short(path: Path) -> None:
    table = pd.read_excel(path)
    tsv = path.with_suffix(".tsv")
    table.to_csv(tsv, sep="\t", index=False)
    tsv.write_bytes(tsv.read_bytes()[:-10])
    path.unlink()


def _damaged_header(path: Path) -> None:
    table = pd.read_excel(path)
    table.rename(columns={"contam_dataset": "contam_datas\x00et", "index": "indx"}).to_excel(path, index=False)


def _second_sheet(path: Path) -> None:
    """The rows moved to a second sheet, an empty first one left (a spreadsheet edited by hand)."""
    table = pd.read_excel(path)
    with pd.ExcelWriter(path) as writer:
        table.iloc[:0].to_excel(writer, sheet_name="notes", index=False)
        table.to_excel(writer, sheet_name="results", index=False)


def _json_lists(path: Path) -> None:
    table = pd.read_excel(path)
    path.with_suffix(".json").write_text(json.dumps(table.astype(str).values.tolist()))
    path.unlink()


def _a_hit_flipped(path: Path) -> None:
    table = pd.read_excel(path)
    table.loc[5, "hit"] = 1 - table.loc[5, "hit"]
    table.to_excel(path, index=False)


def _one_row_of_another_benchmark(path: Path) -> None:
    table = pd.read_excel(path)
    table.loc[3, "contam_benchmark"] = "realworldqa"
    table.to_excel(path, index=False)


@pytest.mark.parametrize(("damage", "expected"), [
    (_truncated_xlsx, "_exact_matching_result.xlsx: not a readable VLMEvalKit result file"),
    (_fewer_rows, "_exact_matching_result.xlsx: 22 rows, but the export had 24"),
    (_as_tsv_cut_short, "_exact_matching_result.tsv: not a readable VLMEvalKit result file"),
    (_damaged_header, "_exact_matching_result.xlsx: lacks column(s) index, contam_dataset"),
    (_second_sheet, "_exact_matching_result.xlsx: not a readable VLMEvalKit result file (ValueError: 2 sheets"),
    (_json_lists, "_exact_matching_result.json: not a readable VLMEvalKit result file (ValueError: VLMEvalKit writes"),
    (_one_row_of_another_benchmark, "_exact_matching_result.xlsx: rows with 2 different contam_benchmark"),
    (_a_hit_flipped, "gives 1: the hit is not this reply's"),
], ids=["a truncated xlsx", "rows missing", "a tsv cut short", "a damaged header", "a second sheet",
        "json as lists", "a row of another benchmark", "a hit its reply contradicts"])  # fmt: skip
def test_the_report_refuses_a_damaged_result_file_naming_it(damage, expected, work_dir, tmp_path, capsys):
    _damaged(work_dir[0], tmp_path / "work", "oracle_MMStar_contam_exact_matching_result.xlsx", damage)
    code, _, err = run_cli(capsys, "report", tmp_path / "work", "--json", tmp_path / "r.json")
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert not (tmp_path / "r.json").exists()


def test_the_report_refuses_another_set_than_the_one_that_was_scored(work_dir, fixture_sets, tmp_path, capsys,
                                                                     monkeypatch):  # fmt: skip
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(fixture_sets["mmstar"], other / "data.parquet")
    (other / "data.manifest.json").write_text(json.dumps({"verification": {"verified": False}}))
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(other))
    code, _, err = run_cli(capsys, "report", work_dir[0], "--json", tmp_path / "r.json")
    assert code == 2 and "mmstar: the runs scored the set" in err and str(other) in err, err


def test_the_report_refuses_versions_matched_by_different_judges(exported, mmstar_rows, tmp_path, capsys,
                                                                 fixture_sets, monkeypatch):  # fmt: skip
    """The perturbed and original exports run apart, their results named by two judges."""
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
    for family in ("perturbed", "original"):
        assert main(["export", "vlmevalkit", "mmstar", "--family", family, "--lmudata", str(exported)]) == 0
    original = {row["item_id"]: row["original_answer"] for row in mmstar_rows}
    names = ("MMStar_contam_perturbed", "MMStar_contam_original")
    model = ScriptedVLM([s for n in names for s in shown_in_export(read_tsv(exported / f"{n}.tsv"), original)])
    with LoopbackServer(model) as server:
        vlmeval(exported, tmp_path / "work", server.base_url, names, ("memoriser",))
    code, _, err = run_cli(capsys, "report", tmp_path / "work", "--json", tmp_path / "r.json")
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["delta"] == -1.0
    renamed = lambda path: path.rename(path.with_name(path.name.replace("exact_matching", "gpt-4o-mini")))  # noqa: E731
    _damaged(tmp_path / "work", tmp_path / "work", "memoriser_MMStar_contam_original_exact_matching_result.xlsx",
             renamed)  # fmt: skip
    code, _, err = run_cli(capsys, "report", tmp_path / "work", "--json", tmp_path / "r2.json")
    assert code == 2 and "the versions were scored by different judges" in err, err


@pytest.fixture(scope="module")
def messy_runs(exported, fixture_sets, mmstar_rows, tmp_path_factory) -> dict:
    """One scripted model, its reply to every version a function of what it sees, in each of 14 real formats (a
    bare letter, "(C)", "Answer: D", "**A**", the option's text, prose, nothing), asked by lmms-eval's OpenAI
    loader on `mmstar_contam` and by VLMEvalKit on the export of the same set; per host, each version's
    correctness, and the reply it got."""
    folder = tmp_path_factory.mktemp("messy")
    original = {row["item_id"]: row["original_answer"] for row in mmstar_rows}
    model = ScriptedVLM(shown_in_export(read_tsv(exported / "MMStar_contam.tsv"), original))
    loader = "model_version=messy,base_url={},api_key=none,max_retries=1"
    with pytest.MonkeyPatch.context() as monkeypatch, LoopbackServer(model) as server:
        monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
        run = run_lmms_eval(["--model", "openai", "--model_args", loader.format(server.base_url), "--tasks",
                             "mmstar_contam"], folder / "lmms-eval")  # fmt: skip
        vlmeval(exported, folder / "vlmeval", server.base_url, ("MMStar_contam",), ("messy",))
    (result,) = (folder / "vlmeval").rglob("messy_MMStar_contam_exact_matching_result.xlsx")
    return {
        "folder": folder,
        "model": model,
        "lmms-eval": {
            (s["contam_ids"]["item_id"], s["contam_ids"]["variant"]): s["contam_ids"]["correct"]
            for s in run.samples["mmstar_contam"]
        },  # fmt: skip
        "VLMEvalKit": {
            (r["contam_item_id"], r["contam_variant"]): int(r["hit"]) for r in pd.read_excel(result).to_dict("records")
        },  # fmt: skip
        "replies": {(s.item_id, s.variant): model.policies["messy"](s) for s in model.shown},
        "shown": {(s.item_id, s.variant): s for s in model.shown},
    }


def test_the_same_replies_get_the_same_verdict_from_both_hosts(messy_runs, tmp_path, capsys, with_sets):
    """Each version is judged the same by both hosts but for one explained difference of answer matching: a reply
    that is an option's text alone is matched to that option by VLMEvalKit's rules and read as no letter (wrong)
    by lmms-eval's MMStar scoring."""
    ours, theirs, replies, shown = (messy_runs[key] for key in ("lmms-eval", "VLMEvalKit", "replies", "shown"))
    assert len(ours) == len(theirs) == 24 and set(ours) == set(theirs)
    assert len(set(replies.values())) >= 14 and 0 < sum(ours.values()) < 24  # every format, right and wrong
    text_of_gold = {key for key, s in shown.items() if replies[key] == s.options[s.letters.index(s.gold)]}
    assert text_of_gold, "the formats must hold the right option's text alone"
    assert {key for key in ours if ours[key] != theirs[key]} == text_of_gold
    assert all(theirs[key] == 1 and ours[key] == 0 for key in text_of_gold)
    assert sum(messy_runs["model"].asked.values()) == 48  # each host asked every version once
    both = (messy_runs["folder"] / "lmms-eval", messy_runs["folder"] / "vlmeval")
    code, _, err = run_cli(capsys, "report", *both, "--json", tmp_path / "r.json")
    assert code == 0, err  # both hosts' folders in one report, side by side
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert sorted(r["host"] for r in results) == ["VLMEvalKit", "lmms-eval"]
    # Fourth probe: an lmms-eval run named as the VLMEvalKit run's model was merged into its row, one verdict lost.
    clash = shutil.copytree(both[0], tmp_path / "clash")
    (results_file,) = clash.rglob("*_results.json")
    logged = json.loads(results_file.read_text())
    logged["model_name"] = next(r["model"] for r in results if r["host"] == "VLMEvalKit")
    results_file.write_text(json.dumps(logged))
    code, _, err = run_cli(capsys, "report", clash, both[1], "--json", tmp_path / "clash.json")
    assert code == 2 and "messy (VLMEvalKit): two runs of mmstar under this model name" in err, err
    assert not (tmp_path / "clash.json").exists()
    # Fifth probe: names that differ only in white space or an invisible character print as one: refused too.
    for lookalike in ("messy  (VLMEvalKit)", "messy (VLMEvalKit) ", "messy (VLMEvalKit)\u200b"):
        results_file.write_text(json.dumps({**logged, "model_name": lookalike}))
        code, _, err = run_cli(capsys, "report", clash, both[1], "--json", tmp_path / "clash.json")
        assert code == 2 and "print as one name; rename one" in err and not (tmp_path / "clash.json").exists(), err


def test_inspect_judges_the_same_replies_by_its_answer_format_alone(messy_runs, mmstar_rows, tmp_path, capsys,
                                                                   with_sets):  # fmt: skip
    """inspect-ai, the third host, asked the same set by its own `inspect eval` and given the same reply to each
    version: its scorer reads a letter only in the form "ANSWER: X", so a version is right there exactly where the
    reply is "Answer: <gold>", which lmms-eval reads as right too; the three hosts' folders go to one report."""
    pytest.importorskip("inspect_ai", reason="inspect-ai needs Python 3.11 (the [inspect] extra)")
    from lmms_contam.hosts.inspect_ai.reader import read_run

    model = ScriptedVLM(shown_in_versions("mmstar", "contam", mmstar_rows))
    with LoopbackServer(model) as server:
        logs = inspect_eval(tmp_path / "inspect", server.base_url, ["lmms_contam/mmstar_contam"], ("messy",))
    (run_log,) = logs.glob("*.eval")
    inspected = {(item.item_id, item.variant): item.correct for item in read_run(run_log).items}
    assert {(s.item_id, s.variant): model.policies["messy"](s) for s in model.shown} == messy_runs["replies"]
    shown, replies = messy_runs["shown"], messy_runs["replies"]
    in_answer_form = {key for key, s in shown.items() if replies[key] == f"Answer: {s.gold}"}
    assert in_answer_form and {key for key in inspected if inspected[key]} == in_answer_form
    assert all(messy_runs["lmms-eval"][key] == 1 for key in in_answer_form)  # lmms-eval reads those alike
    hosts = (messy_runs["folder"] / "lmms-eval", messy_runs["folder"] / "vlmeval", logs)
    code, _, err = run_cli(capsys, "report", *hosts, "--json", tmp_path / "r.json")
    assert code == 0, err  # the three hosts' folders in one report, side by side
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert sorted(r["host"] for r in results) == ["VLMEvalKit", "inspect-ai", "lmms-eval"]


def mmbench_layout(contam: pd.DataFrame, unrotated: int = 1) -> tuple[pd.DataFrame, list[Shown]]:
    """The original versions of an export in VLMEvalKit's MMBench layout: item i at index i, rotation r of its
    options at i + r * 1e6 (the first `unrotated` items left out of the rotations, as VLMEvalKit leaves out
    items whose options name option letters), and what each row shows."""
    rows, shown = [], []
    originals = contam[contam["split"] == "original"].reset_index(drop=True)
    for number, row in enumerate(originals.to_dict("records"), 1):
        options = [row[letter] for letter in "ABCD"]
        n, gold = len(options), "ABCD".index(row["answer"])
        image = base64.b64decode(row["image"])
        orders = rotations(n)[:1] if number <= unrotated else rotations(n)
        for r, order in enumerate(orders):
            shown_options = tuple(options[i] for i in order)
            letter = gold_letter(order, gold)
            rows.append(
                {
                    "index": number + r * 1_000_000,
                    "question": row["question"],
                    **dict(zip("ABCD", shown_options, strict=True)),
                    "answer": letter,
                    "category": row["category"],
                    "l2-category": row["l2-category"],
                    "image": row["image"],
                }
            )
            shown.append(Shown(str(number), f"rotation{r}", shown_options, letter, row["answer"], thumbnail(image),
                               view_of(shown_options, image)))  # fmt: skip
    return pd.DataFrame(rows), shown


def _first_index_not_a_number(path: Path) -> None:
    table = pd.read_excel(path).astype({"index": object})
    table.loc[0, "index"] = "x7"
    table.to_excel(path, index=False)


def test_the_report_reads_vlmevalkits_own_circular_eval_of_mmbench(exported, tmp_path, capsys):
    """A run of VLMEvalKit's own MMBench_DEV_EN (here items in its layout, run as a custom dataset under that name,
    since VLMEvalKit would download its own), evaluated with its CircularEval and PRINT_VANILLA=1: the report's
    circular detector is VLMEvalKit's circular hit against its hit in the original order, per item."""
    lmudata = tmp_path / "LMUData"
    lmudata.mkdir()
    table, shown = mmbench_layout(read_tsv(exported / "MMStar_contam.tsv"))
    table.to_csv(lmudata / "MMBench_DEV_EN.tsv", sep="\t", index=False)
    model = ScriptedVLM(shown)
    models = ("oracle", "memoriser", "random")
    with LoopbackServer(model) as server:
        config = {"model": {name: {"class": "LMDeployAPI", "model": name, "key": "none", "retry": 1,
                                   "api_base": f"{server.base_url}/chat/completions"} for name in models},
                  "data": {"MMBench_DEV_EN": {"class": "CustomMCQDataset", "dataset": "MMBench_DEV_EN"}}}  # fmt: skip
        (tmp_path / "config.json").write_text(json.dumps(config))
        environment = {**os.environ, "LMUData": str(lmudata), "PRINT_VANILLA": "1"}
        done = subprocess.run([sys.executable, "-m", "vlmeval", "--config", str(tmp_path / "config.json"), "--judge",
                               "exact_matching", "--work-dir", str(tmp_path / "work")], capture_output=True, text=True,
                              timeout=600, env=environment)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert sum(model.asked.values()) == len(models) * len(table)
    code, _, err = run_cli(capsys, "report", tmp_path / "work", "--json", tmp_path / "r.json")
    assert code == 0, err
    detectors = {d["model"].removesuffix(" (VLMEvalKit)"): d for d in json.loads((tmp_path / "r.json").read_text())
                 ["detectors"]}  # fmt: skip
    assert set(detectors) == set(models)
    for name in models:
        right: dict[str, list[bool]] = {}
        for s in shown:
            right.setdefault(s.item_id, []).append(model.policies[name](s) == s.gold)
        first = [versions[0] for versions in right.values()]
        every = [all(versions) for versions in right.values()]
        found = detectors[name]
        assert (found["benchmark"], found["detector"], found["n_items"], found["n_excluded"]) == (
            "mmbench", "circular", len(right), 1)  # fmt: skip
        assert found["reference"] == pytest.approx(sum(first) / len(first))
        assert found["score"] == pytest.approx(sum(every) / len(every))
        assert found["n_changed"] == sum(f and not e for f, e in zip(first, every, strict=True))
    assert not detectors["oracle"]["flagged"] and detectors["oracle"]["signal"] == 0.0
    assert detectors["memoriser"]["flagged"] and detectors["memoriser"]["p_value"] < 0.01
    assert 0 < detectors["random"]["score"] < detectors["random"]["reference"]  # the draws make it worth checking
    damaged = _damaged(
        tmp_path / "work",
        tmp_path / "damaged",
        "oracle_MMBench_DEV_EN_exact_matching_vanilla_circ0_result.xlsx",
        _first_index_not_a_number,
    )
    code, _, err = run_cli(capsys, "report", tmp_path / "damaged")  # defect 16: "could not convert", no file named
    assert code == 2 and f"{damaged}: index 'x7' is not an item number" in err, err
    for vanilla in (tmp_path / "work").rglob("*_vanilla_circ0_result.xlsx"):
        vanilla.unlink()  # evaluated without PRINT_VANILLA=1: the reference is missing, and the user told how to add it
    warnings: list[str] = []
    sink = logger.add(warnings.append, level="WARNING", format="{message}")
    try:
        code, _, err = run_cli(capsys, "report", tmp_path / "work", "--json", tmp_path / "r2.json")
    finally:
        logger.remove(sink)
    assert code == 2 and "no runs of lmms-contam's tasks" in err and "Traceback" not in err, err
    told = [w for w in warnings if "PRINT_VANILLA=1 python -m vlmeval --data MMBench_DEV_EN" in w]
    assert len(told) == len(models), warnings


@pytest.mark.parametrize("verbose", [None, "1", "0"])
def test_hits_are_rechecked_whatever_vlmevalkits_verbose_setting(verbose, tmp_path, monkeypatch):
    """VLMEvalKit's rule matching reads $VERBOSE (set, it will not read "A" among many words as a letter): a run's
    hits, made with it set or not, are accepted under either setting of the report's; a hit no setting gives
    is refused."""
    if verbose is None:
        monkeypatch.delenv("VERBOSE", raising=False)
    else:
        monkeypatch.setenv("VERBOSE", verbose)
    rows = {"index": [1, 2], "A": ["cat", "cat"], "B": ["dog", "dog"], "answer": ["A", "A"],
            "prediction": ["It is then A here", "B"]}  # fmt: skip
    for hit in (1, 0):  # the first reply read as A (VERBOSE unset in the run), or as no letter (set)
        table = pd.DataFrame({**rows, "hit": [hit, 0]})
        result = ResultFile(tmp_path / "r_result.xlsx", "m", "MMStar_contam", "exact_matching", "mmstar", "contam",
                            table)  # fmt: skip
        assert rechecked(result) is None
    table = pd.DataFrame({**rows, "hit": [1, 1]})
    with pytest.raises(ReportInputError, match="row 3 .*hit 1, but VLMEvalKit's own matching of the reply 'B'"):
        rechecked(ResultFile(tmp_path / "r_result.xlsx", "m", "MMStar_contam", "exact_matching", "mmstar", "contam",
                             table))  # fmt: skip


def test_rechecking_hits_leaves_autograd_as_it_found_it(tmp_path):
    """Importing VLMEvalKit turns autograd off process-wide; a report made in the same process as a fine-tuning
    run (the experiment's) must not leave the run unable to train."""
    script = f"""
import pandas as pd, torch
from pathlib import Path
from lmms_contam.hosts.vlmevalkit.hits import rechecked
from lmms_contam.hosts.vlmevalkit.result_files import ResultFile
table = pd.DataFrame({{"index": [1], "A": ["cat"], "B": ["dog"], "answer": ["A"], "prediction": ["A"], "hit": [1]}})
assert rechecked(ResultFile(Path({str(tmp_path)!r}) / "r_result.xlsx", "m", "MMStar_contam", "exact_matching",
                            "mmstar", "contam", table)) is None
import vlmeval.vlm  # already imported by the recheck: its side effect is not repeated
print("grad", torch.is_grad_enabled())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "grad True" in done.stdout, done.stdout


def test_the_report_never_writes_over_the_status_record_of_an_eval_folder(work_dir, tmp_path, capsys):
    """Reporting an eval-id folder of VLMEvalKit's work dir reads the status.json one folder up (which says whose
    and which datasets its results are): `--json` naming it overwrote it with exit 0, and the run could not be
    reported again."""
    shutil.copytree(work_dir[0], tmp_path / "work", symlinks=True)
    model = tmp_path / "work" / "oracle"
    eval_folder = model / "T20261206-000000"  # the official run.py keeps a run's files in its eval-id folder
    eval_folder.mkdir(exist_ok=True)
    for path in model.glob("oracle_*"):
        path.rename(eval_folder / path.name)
    status = model / "status.json"
    before = status.read_bytes()
    code, _, err = run_cli(capsys, "report", eval_folder, "--json", status)
    assert code == 2 and f"--json {status}: is a file of the runs the report reads" in err, err
    assert status.read_bytes() == before
