"""`lmms-contam report` on real lmms-eval outputs made in the test with known-answer models."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.fixtures import answers_right, mmstar_rows, naturalbench_rows, point_at_sets, real_photos, realworldqa_rows
from helpers.harness import run_lmms_eval_together
from scipy.stats import binomtest

from lmms_contam import stats
from lmms_contam.detectors.options import names_option_letters
from lmms_contam.registry.specs import perturb_from_hub

BENCHMARKS = ("mmstar", "naturalbench", "realworldqa")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, fixture_sets) -> dict[str, Path]:
    """One output folder per model, as leaderboard runs would leave them."""
    root = tmp_path_factory.mktemp("lmms-eval-out")
    runs = {
        "oracle": {"model": "contam_test_oracle", "tasks": "contam_paired"},
        "memoriser": {"model": "contam_test_memoriser", "tasks": "contam_paired"},
        "dummy": {"model": "dummy", "model_args": "response=A", "tasks": "contam_paired,mmstar_perturbed"},
        "separate": {"model": "contam_test_memoriser", "tasks": "mmstar_original,mmstar_perturbed"},
        "limited": {"model": "dummy", "tasks": "mmstar_contam", "limit": 6},
        "detectors": {"model": "contam_test_memoriser", "tasks": "mmstar_detectors"},
        "circular_only": {
            "model": "dummy",
            "model_args": "response=A",
            "tasks": "realworldqa_circular,mmstar_circular,mmstar_text_only,mmstar_masked_option",
        },
    }
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_at_sets(monkeypatch, fixture_sets)
        done = run_lmms_eval_together(runs, root)
    for name, run in done.items():
        assert run.results, f"{name} run wrote no results:\n{run.output[-3000:]}"
    return {name: run.folder for name, run in done.items()}


def report(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "report", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def expected_dummy_verdicts() -> dict[str, str]:
    """Worked out from the fixture rows alone: the dummy answers "A" everywhere."""
    photos = real_photos()
    rows = {"mmstar": mmstar_rows(photos), "realworldqa": realworldqa_rows(photos),
            "naturalbench": naturalbench_rows(photos)}  # fmt: skip
    p_values, deltas = {}, {}
    for benchmark, bench_rows in rows.items():
        a = [answers_right(benchmark, r, "A", "original") for r in bench_rows]
        b = [answers_right(benchmark, r, "A", "perturbed") for r in bench_rows]
        strata = [r["l2_category"] for r in bench_rows] if benchmark == "mmstar" else None
        deltas[benchmark] = stats.accuracy(b, strata) - stats.accuracy(a, strata)
        r2w = sum(x and not y for x, y in zip(a, b, strict=True))
        w2r = sum(y and not x for x, y in zip(a, b, strict=True))
        p_values[benchmark] = binomtest(r2w, r2w + w2r).pvalue if r2w + w2r else 1.0
    order = sorted(p_values, key=p_values.get)  # Holm by hand
    adjusted, running = {}, 0.0
    for rank, benchmark in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p_values[benchmark]))
        adjusted[benchmark] = running
    return {
        b: "no evidence" if deltas[b] >= 0 else ("contaminated" if adjusted[b] < 0.05 else "inconclusive") for b in rows
    }


def test_verdicts_for_oracle_memoriser_and_dummy(outputs, tmp_path, with_sets):
    out = tmp_path / "report.json"
    done = report(str(outputs["oracle"]), str(outputs["memoriser"]), str(outputs["dummy"]), "--json", str(out))
    assert done.returncode == 0, done.stderr
    payload = json.loads(out.read_text())
    assert payload["report_version"] == 1
    verdicts = {(r["model"].split(" ")[0], r["benchmark"]): r["verdict"] for r in payload["results"]}
    for benchmark in BENCHMARKS:
        assert verdicts[("contam_test_oracle", benchmark)] == "no evidence"
        assert verdicts[("contam_test_memoriser", benchmark)] == "contaminated"
    for benchmark, verdict in expected_dummy_verdicts().items():
        assert verdicts[("dummy", benchmark)] == verdict, benchmark
    memoriser = [r for r in payload["results"] if r["model"].startswith("contam_test_memoriser")]
    assert all(len(r["flagged"]) == r["n_pairs"] == 12 for r in memoriser)


def test_report_numbers_equal_the_task_numbers(outputs, tmp_path):
    out = tmp_path / "report.json"
    assert report(str(outputs["dummy"]), "--json", str(out)).returncode == 0
    (results_file,) = outputs["dummy"].rglob("*_results.json")
    task_results = json.loads(results_file.read_text())["results"]
    for row in json.loads(out.read_text())["results"]:
        task = task_results[f"{row['benchmark']}_contam"]
        assert row["acc_original"] == pytest.approx(task["acc_original,none"])
        assert row["acc_perturbed"] == pytest.approx(task["acc_perturbed,none"])
        assert row["delta"] == pytest.approx(task["delta,none"])
        assert row["delta_ci"] == pytest.approx([task["delta_ci_low,none"], task["delta_ci_high,none"]])
        assert row["mcnemar_p"] == pytest.approx(task["mcnemar_p,none"])
        assert len(row["flagged"]) == task["n_flagged,none"]
        assert row["delta_ci"][0] <= row["delta"] <= row["delta_ci"][1]
        for side in ("original", "perturbed"):
            assert 0 <= row[f"acc_{side}_ci"][0] <= row[f"acc_{side}"] <= row[f"acc_{side}_ci"][1] <= 1
    # The headline is lmms-eval's: MMStar's accuracy as its built-in aggregation (a macro average over
    # l2_category, lmms_eval.tasks.mmstar.utils) gives it for the same replies, in the same run.
    mmstar = next(r for r in json.loads(out.read_text())["results"] if r["benchmark"] == "mmstar")
    assert mmstar["acc_perturbed"] == pytest.approx(task_results["mmstar_perturbed"]["average,none"])
    assert mmstar["accuracy_averaged_over"] == "categories"


def test_separate_original_and_perturbed_runs_join_like_the_paired_task(outputs, tmp_path):
    out_separate, out_paired = tmp_path / "separate.json", tmp_path / "paired.json"
    assert report(str(outputs["separate"]), "--json", str(out_separate)).returncode == 0
    assert report(str(outputs["memoriser"]), "--json", str(out_paired)).returncode == 0
    (separate,) = json.loads(out_separate.read_text())["results"]
    paired = next(r for r in json.loads(out_paired.read_text())["results"] if r["benchmark"] == "mmstar")
    for key in ("acc_original", "acc_perturbed", "delta", "delta_ci", "mcnemar_p", "n_pairs"):
        assert separate[key] == paired[key], key


def test_markdown_leaderboard_lists_every_model(outputs):
    done = report(str(outputs["oracle"]), str(outputs["memoriser"]))
    assert done.returncode == 0, done.stderr
    assert "## Leaderboard" in done.stdout
    assert "| contam\\_test\\_memoriser | -100.0 (contaminated) | -100.0 (contaminated) | -100.0 (contaminated) |" in (
        done.stdout
    )


def _refused(args: list[str], tmp_path: Path, expected: str) -> None:
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    done = report(*args, "--html", str(html), "--json", str(js))
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr, done.stderr
    assert not html.exists() and not js.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".r.html", ".r.json"))]


def test_limit_runs_are_refused(outputs, tmp_path):
    _refused([str(outputs["limited"])], tmp_path, "ran with --limit (6 of 24 documents)")


def test_mismatched_item_sets_are_refused(outputs, tmp_path):
    copy = tmp_path / "in"
    shutil.copytree(outputs["separate"], copy)
    (perturbed,) = copy.rglob("*_samples_mmstar_perturbed.jsonl")
    lines = perturbed.read_text().splitlines()
    perturbed.write_text("\n".join(lines[:-2]) + "\n")
    _refused([str(copy)], tmp_path, f"{perturbed}: {len(lines) - 2} samples, but its results file says {len(lines)}")
    # A run whose results file agrees (two items really not scored) is refused for the pairs it lacks.
    results_path = perturbed.with_name(perturbed.name.split("_samples_")[0] + "_results.json")
    results = json.loads(results_path.read_text())
    results["n-samples"]["mmstar_perturbed"] = {"original": len(lines) - 2, "effective": len(lines) - 2}
    results_path.write_text(json.dumps(results))
    _refused([str(copy)], tmp_path, "the item sets differ: 2 item(s) only in")


def test_truncated_and_empty_files_are_refused(outputs, tmp_path):
    copy = tmp_path / "in"
    shutil.copytree(outputs["oracle"], copy)
    (samples,) = copy.rglob("*_samples_realworldqa_contam.jsonl")
    text = samples.read_text()
    samples.write_text(text[: len(text) // 2])
    _refused([str(copy)], tmp_path, f"{samples}:")
    samples.write_text("")
    _refused([str(copy)], tmp_path, f"{samples}: empty file")


def test_unknown_task_is_refused(outputs, tmp_path):
    (builtin_like,) = outputs["dummy"].rglob("*_samples_mmstar_perturbed.jsonl")
    copy = tmp_path / "in"
    copy.mkdir()
    odd = copy / builtin_like.name.replace("mmstar_perturbed", "mmstar")
    shutil.copy(builtin_like, odd)
    shutil.copy(next(outputs["dummy"].rglob("*_results.json")), copy)
    _refused([str(odd)], tmp_path, "task 'mmstar' is not an lmms-contam task")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]  # fmt: skip


def _count_near(pixels, colour: tuple[int, int, int], tolerance: int = 40) -> int:
    import numpy as np

    distance = np.abs(pixels.astype(int) - np.asarray(colour)).sum(axis=-1)
    return int((distance < tolerance).sum())


def _page_requests(chromium: str, page: Path, folder: Path, screenshot: Path | None = None) -> list[str]:
    """URLs the page itself asked for, read from Chromium's net log.

    Chromium's own background traffic (update checks, time sync) is started by the browser, with no
    initiating origin; a request made by the page carries the page's origin.
    """
    netlog = folder / f"{page.stem}.netlog.json"
    shot = [f"--screenshot={screenshot}", "--window-size=1300,6000"] if screenshot else ["--dump-dom"]
    subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={folder / ('profile-' + page.stem)}",
         f"--log-net-log={netlog}", *shot, page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    starts = [e["params"] for e in log["events"] if e["type"] == start_job and "url" in e.get("params", {})]
    return [params["url"] for params in starts if params.get("initiator") != "not an origin"]


def test_html_page_shows_plots_and_image_pairs_and_makes_no_network_request(outputs, tmp_path, with_sets):
    import numpy as np
    from PIL import Image

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is needed for this test; .ci/run installs it"
    page = tmp_path / "report.html"
    done = report(str(outputs["oracle"]), str(outputs["memoriser"]), "--html", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "http://" not in text and "https://" not in text
    assert text.count('alt="original"') == text.count('alt="perturbed"') == len(perturb_from_hub()) * 12

    # The first screen says who is contaminated on what, before any table.
    summary = text[: text.index("<h2>Leaderboard")]
    every = len(perturb_from_hub())
    assert "<li>contam_test_memoriser: contaminated on ai2d (delta -100.0 points, p " in summary
    assert summary.count("(delta -100.0 points, p ") == every and " and seedbench (delta -100.0 points, p " in summary
    # 12 pairs each, none answered differently, at 0.05 / 9: only a drop of most pairs is flagged 80% of the time.
    detectable = re.search(
        rf"<li>contam_test_oracle: no evidence on {every} benchmarks \(a drop of ([\d.]+)(?:-[\d.]+)? points or more "
        r"would have been flagged with 80% power\)\.</li>",
        summary,
    )
    assert detectable and 50 < float(detectable[1]) <= 100, summary
    # Every image pair names its model; each image opens at full size over the page (its anchor is :target).
    pairs = text.split('<div class="pair">')[1:]
    assert pairs and all("<b>contam_test_memoriser</b>: " in pair for pair in pairs)
    anchors = re.findall(r'<a class="zoom" id="(img-[0-9a-f]{16})"', text)
    assert len(anchors) == len(set(anchors)) == 2 * len(pairs)

    shot = tmp_path / "shot.png"
    assert _page_requests(chromium, page, tmp_path, shot) == []
    # The net-log check can fail: a page that loads one remote image is caught.
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://127.0.0.1:9/pixel.png"></body></html>')
    assert _page_requests(chromium, control, tmp_path) == ["http://127.0.0.1:9/pixel.png"]
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    top = pixels[:1300]  # the tables and plots come first, the image pairs after them
    # The accuracy plot's markers and intervals (original blue, perturbed orange, 2 of each colour per
    # benchmark's panel), the forest plot's red categories (the memoriser loses every one) and the red badges.
    assert _count_near(pixels, (0x15, 0x65, 0xC0)) > 150
    assert _count_near(pixels, (0xE6, 0x51, 0x00)) > 150
    assert _count_near(pixels, (0xC6, 0x28, 0x28)) > 1500
    # Opened: the page's address names an image's anchor, as a click on it does.
    zoomed = tmp_path / "zoomed.png"
    subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile-zoom'}", f"--screenshot={zoomed}",
         "--window-size=1300,900", f"{page.as_uri()}#{anchors[0]}"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    view = np.asarray(Image.open(zoomed).convert("RGB")).astype(int)
    dark = view.sum(axis=-1) < 3 * 70  # the overlay dims the white page around the image
    assert dark[:, :40].mean() > 0.9 and dark[:, -40:].mean() > 0.9
    rows, columns = np.nonzero(view.min(axis=-1) > 200)  # the photo's own white background, undimmed
    shown = (columns.max() - columns.min() + 1, rows.max() - rows.min() + 1)
    uri = re.search(
        rf'id="{anchors[0]}" href="#{anchors[0]}"><img alt="[^"]*" src="data:image/jpeg;base64,([^"]+)"', text
    )
    stored = Image.open(io.BytesIO(base64.b64decode(uri.group(1)))).size
    assert max(stored) >= 320 and abs(shown[0] - stored[0]) <= 2 and abs(shown[1] - stored[1]) <= 2  # full size
    assert ".pair img{width:360px" in text  # and at least 320 px wide on the page before it is opened
    # Photographs: many distinct colours, which tables and plots never have.
    # (measured: about 140 quantised colours in the plots and tables, about 2,600 with the photos)
    assert len(np.unique(pixels.reshape(-1, 3) // 8, axis=0)) > 1000
    assert len(np.unique(top.reshape(-1, 3), axis=0)) > 50


def test_results_from_another_task_version_are_refused(outputs, tmp_path):
    copy = tmp_path / "in"
    shutil.copytree(outputs["oracle"], copy)
    (results_file,) = copy.rglob("*_results.json")
    results = json.loads(results_file.read_text())
    results["configs"]["mmstar_contam"]["metadata"] = [{"version": 2.0}]
    results_file.write_text(json.dumps(results))
    _refused([str(copy)], tmp_path, "task mmstar_contam version 2.0; this report reads version 1.0")


def test_peer_detectors_sit_beside_the_perturbation_verdict(outputs, tmp_path):
    from lmms_contam.detectors.registry import DETECTORS
    from lmms_contam.hosts.lmms_eval.scoring import detector_metrics

    out, page = tmp_path / "report.json", tmp_path / "report.html"
    args = (str(outputs["detectors"]), str(outputs["circular_only"]))
    done = report(*args, "--json", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr
    entries = {
        (e["model"].split(" ")[0], e["benchmark"], e["detector"]): e for e in json.loads(out.read_text())["detectors"]
    }
    assert set(entries) == {("contam_test_memoriser", "mmstar", d) for d in DETECTORS} | {
        ("dummy", "realworldqa", "circular"),
        ("dummy", "mmstar", "circular"),
        ("dummy", "mmstar", "text_only"),
        ("dummy", "mmstar", "masked_option"),
    }
    # The report's figures are the task's own metrics, read from the same samples.
    for (model, benchmark, detector), entry in entries.items():
        (results_file,) = outputs["detectors" if model.startswith("contam") else "circular_only"].rglob(
            "*_results.json"
        )
        task = json.loads(results_file.read_text())["results"][f"{benchmark}_{detector}"]
        for metric in detector_metrics(DETECTORS[detector]):
            field, logged = metric.aggregation.removeprefix("detector_"), task[f"{metric.name},none"]
            if math.isnan(logged):  # masked option on MMStar: no rate by construction, so no reference or p
                assert entry[field] is None, (detector, field)
                continue
            assert entry[field] == pytest.approx(logged), (detector, field)
    # The memoriser answers the letter it memorised: every rotation and shuffle breaks it, except on
    # the item CircularEval leaves out (asked once, unrotated), and it answers every question without
    # looking (12 of 12 against a chance of 1/4).
    memoriser = {d: e for (m, _, d), e in entries.items() if m == "contam_test_memoriser"}
    rows = mmstar_rows(real_photos())
    kept_by_stratum = stats.accuracy([int(names_option_letters(r["options"])) for r in rows],
                                     [r["l2_category"] for r in rows])  # fmt: skip
    assert memoriser["circular"]["n_excluded"] == 1
    assert memoriser["circular"]["signal"] == pytest.approx(kept_by_stratum - 1.0)
    assert memoriser["option_shuffle"]["signal"] == -1.0
    assert memoriser["text_only"]["signal"] == pytest.approx(0.75)
    assert memoriser["text_only"]["p_value"] == pytest.approx(0.25**12)
    # It names every hidden option; MMStar states no rate for a model that never saw the items: no verdict.
    masked = memoriser.pop("masked_option")
    assert (masked["score"], masked["n_changed"], masked["p_value"], masked["flagged"]) == (1.0, 12, None, False)
    assert all(e["flagged"] for e in memoriser.values())
    dummy = entries[("dummy", "realworldqa", "circular")]
    right = sum(r["original_answer"] == "A" for r in realworldqa_rows(real_photos()))
    assert dummy["signal"] == pytest.approx(-right / 12)
    assert dummy["flagged"] == (binomtest(right, right).pvalue < 0.05)

    markdown = report(*args).stdout
    assert "## Peer detectors" in markdown
    lost = binomtest(11, 11).pvalue  # the 11 rotated items, each right in order and wrong when rotated
    assert (
        f"| contam\\_test\\_memoriser | mmstar | -100.0 (contaminated) | {100 * (kept_by_stratum - 1):+.1f} "
        f"(flagged, p {lost:.2g}, n 12) |" in markdown
    )
    assert "| 100.0% (no reference: --masked-option-reference; n 12) |" in markdown
    assert f"| dummy | realworldqa | - | {-100 * right / 12:+.1f} (" in markdown  # its short name
    assert "| dummy | dummy (response=A) |" in markdown  # and its full identity under Models
    assert "<h2>Peer detectors</h2>" in page.read_text()


def test_the_report_opens_the_set_that_was_scored_and_refuses_another(outputs, fixture_sets, tmp_path, monkeypatch):
    """Every record names its set by the manifest's hash; a set here with another hash is refused, since its
    verification record would describe items that were not scored."""
    manifest = fixture_sets["mmstar"].with_name("mmstar.manifest.json")
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    (samples,) = outputs["memoriser"].rglob("*_samples_mmstar_contam.jsonl")
    logged = {json.loads(line)["contam_ids"]["set_manifest"] for line in samples.read_text().splitlines()}
    assert logged == {digest}
    point_at_sets(monkeypatch, fixture_sets)
    done = report(str(outputs["memoriser"]), "--json", str(tmp_path / "same.json"))
    assert done.returncode == 0, done.stderr
    (mmstar,) = [r for r in json.loads((tmp_path / "same.json").read_text())["results"] if r["benchmark"] == "mmstar"]
    assert mmstar["set"]["location"] == str(fixture_sets["mmstar"])
    other = tmp_path / "mmstar.parquet"
    shutil.copy(fixture_sets["mmstar"], other)
    other.with_name("mmstar.manifest.json").write_text('{"source": "another set"}\n')
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(other))
    _refused([str(outputs["memoriser"])], tmp_path, f"mmstar: the runs scored the set whose manifest has SHA-256 "
             f"{digest[:12]}, but the set that resolves here, {other}")  # fmt: skip


def test_masked_option_guessing_against_a_clean_reference_models_run(outputs, tmp_path):
    """Where the benchmark states no rate by construction, a reference model's run of the same items is the
    reference (the dummy, answering a letter, names no hidden option): exact McNemar on the pairs."""
    out = tmp_path / "report.json"
    reference = ("--masked-option-reference", str(outputs["circular_only"]))
    done = report(str(outputs["detectors"]), *reference, "--json", str(out))
    assert done.returncode == 0, done.stderr
    (entry,) = [e for e in json.loads(out.read_text())["detectors"]
                if e["detector"] == "masked_option" and e["model"].startswith("contam_test_memoriser")]  # fmt: skip
    assert entry["baseline"].startswith("dummy") and (entry["reference"], entry["score"]) == (0.0, 1.0)
    assert entry["p_value"] == pytest.approx(binomtest(12, 12).pvalue) and entry["flagged"]
    assert entry["multimodal_leakage"] is None  # MMStar's measure is text-only's alone
    assert "vs dummy" in report(str(outputs["detectors"]), *reference).stdout
    _refused([str(outputs["detectors"]), "--masked-option-reference", str(outputs["oracle"])], tmp_path,
             "no masked_option runs there")  # fmt: skip


def test_circular_eval_against_a_clean_reference_models_run(outputs, tmp_path):
    """The drop beyond the reference model's on the same items: the dummy (answering "A") loses each rotated
    item whose gold is A; the memoriser loses every rotated item; the item asked unrotated is lost by neither."""
    out = tmp_path / "report.json"
    done = report(str(outputs["detectors"]), "--circular-reference", str(outputs["circular_only"]), "--json", str(out))
    assert done.returncode == 0, done.stderr
    (entry,) = [e for e in json.loads(out.read_text())["detectors"]
                if e["detector"] == "circular" and e["model"].startswith("contam_test_memoriser")]  # fmt: skip
    rows = mmstar_rows(real_photos())
    rotated = [r for r in rows if not names_option_letters(r["options"])]
    dummy_lost = sum(r["original_answer"] == "A" for r in rotated)
    assert dummy_lost == 3 and len(rotated) == 11  # the fixture gives both kinds of item
    assert entry["baseline"].startswith("dummy") and (entry["n_items"], entry["n_changed"]) == (12, 11)
    assert (entry["reference"], entry["score"]) == pytest.approx((-dummy_lost / 12, -11 / 12))
    assert entry["signal"] == pytest.approx((dummy_lost - 11) / 12)
    assert entry["p_value"] == pytest.approx(binomtest(11 - dummy_lost, 11 - dummy_lost).pvalue)
    assert entry["flagged"] and entry["p_value"] < 0.05  # 11 - 3 items lost beyond the dummy's, none the other way
    assert "vs dummy" in report(str(outputs["detectors"]), "--circular-reference", str(outputs["circular_only"])).stdout


def test_text_only_leakage_against_the_base_llms_text_only_run(outputs, tmp_path):
    """MMStar's definition: S_wv against the base LLM's S_t on the same items (here the dummy's run of
    mmstar_text_only stands in for a base LLM), ML = max(0, S_wv - S_t)."""
    out = tmp_path / "report.json"
    done = report(str(outputs["detectors"]), "--text-only-baseline", str(outputs["circular_only"]), "--json", str(out))
    assert done.returncode == 0, done.stderr
    (entry,) = [e for e in json.loads(out.read_text())["detectors"]
                if e["detector"] == "text_only" and e["model"].startswith("contam_test_memoriser")]  # fmt: skip
    base_right = sum(r["original_answer"] == "A" for r in mmstar_rows(real_photos()))
    assert entry["baseline"].startswith("dummy") and entry["n_items"] == 12
    assert (entry["reference"], entry["score"]) == (pytest.approx(base_right / 12), 1.0)
    assert entry["multimodal_leakage"] == entry["signal"] == pytest.approx(1 - base_right / 12)
    assert entry["p_value"] == pytest.approx(binomtest(12 - base_right, 12 - base_right).pvalue)
    plain = report(str(outputs["detectors"])).stdout
    assert "vs dummy" in report(str(outputs["detectors"]), "--text-only-baseline", str(outputs["circular_only"])).stdout
    assert "vs dummy" not in plain and "n 12, vs chance)" in plain
    # the reference must be one model's run, and a run that has text-only samples
    both = tmp_path / "both"
    for name in ("detectors", "circular_only"):
        shutil.copytree(outputs[name], both / name)
    _refused([str(outputs["detectors"]), "--text-only-baseline", str(both)], tmp_path,
             "holds the text_only runs of 2 models")  # fmt: skip
    _refused([str(outputs["detectors"]), "--text-only-baseline", str(outputs["oracle"])], tmp_path,
             "no text_only runs there")  # fmt: skip
