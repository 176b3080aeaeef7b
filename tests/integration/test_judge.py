"""`lmms-contam judge`: the image-text contamination rate from a scan's matched captions.

The scan's output files are written here in the scan's own format (the scan has its own tests);
the judge is a real HTTP server on 127.0.0.1 speaking the OpenAI API, scripted per question.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.judge_scans import ITEMS, write_scan
from helpers.loopback import LoopbackServer, completion

from lmms_contam.corpus.scan import ids_sha256
from lmms_contam.judge.candidates import MAX_CAPTION_CHARS, MatchedSample
from lmms_contam.judge.ngram import answer_grams, prefilter


def verdict(answerable: bool, caption: int) -> str:
    return json.dumps({"answerable": answerable, "caption": caption, "reason": "scripted"})


def scripted(body: dict, _number: int):
    """Answer by the question in the prompt; a second seed disagrees on the dog."""
    prompt = body["messages"][0]["content"]
    stem = re.search(r"Question:\n(.*?)\n", prompt)[1]
    plan = {item[0]: item[4] for item in ITEMS}[stem]
    if plan == "garbage" or (plan == "garbage-then-valid" and not scripted.retried.get(stem)):
        scripted.retried[stem] = True
        return 200, completion("I think the answer is probably yes {not json"), 0.0
    answerable = plan == "answerable" and not (body.get("seed") == 1 and "dog" in prompt)
    return 200, completion(verdict(answerable, 1 if answerable else 0)), 0.0


scripted.retried = {}


def run_judge(scans: Path, originals: Path, *extra: str, base_url: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "judge", str(scans), "--benchmark", "mmstar",
               "--originals", str(originals), "--model", "judge-model", "--concurrency", "3", *extra]  # fmt: skip
    if base_url:
        command += ["--base-url", base_url]
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-secret-123"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_rates_counts_and_cache_against_scripted_verdicts(tmp_path):
    originals, scans = write_scan(tmp_path)
    scripted.retried.clear()
    with LoopbackServer(scripted) as server:
        done = run_judge(scans, originals, base_url=server.base_url)
        assert done.returncode == 0, done.stderr
        assert "notice: 1 caption(s) longer than 500 characters were cut" in done.stdout
        assert "notice: 1 matched sample(s) have only empty captions" in done.stdout
        first_calls = len(server.requests)
        # 5 candidates; "garbage" is asked 3 times, "garbage-then-valid" twice.
        assert first_calls == 3 + 3 + 2
        assert all(r["temperature"] == 0 and r["seed"] == 0 for r in server.requests)
        assert all(r["response_format"]["type"] == "json_schema" for r in server.requests)
        rerun = run_judge(scans, originals, base_url=server.base_url)
        assert rerun.returncode == 0, rerun.stderr
        assert len(server.requests) == first_calls, "a rerun must answer from the cache"
    summary = json.loads((scans / "mmstar.judge.json").read_text())
    assert summary["samples"] == 7
    assert (summary["matched_with_captions"], summary["matched_without_captions"]) == (5, 1)
    assert summary["captions_truncated"] == 1
    counts = summary["judge"]["counts"]
    assert counts == {"answerable": 2, "not answerable": 2, "unjudged": 1}
    assert summary["judge"]["image_text_rate"] == pytest.approx(2 / 7)
    assert summary["judge"]["image_text_rate_upper"] == pytest.approx(3 / 7)
    assert summary["judge"]["usage"][0]["cache_hits"] == 5
    assert summary["image_only_rate"] == pytest.approx(6 / 7)
    # The pre-filter finds the dog, the case-folded Straße and the three friends; the judge, not the
    # pre-filter, decides that "three friends hiking" does not say how many people the image shows.
    assert summary["prefilter_hits"] == 3 and summary["prefilter_rate"] == pytest.approx(3 / 7)
    rows = pd.read_parquet(scans / "mmstar.judge.parquet").set_index("original_id")
    assert rows.loc["0", "prefilter_gram"] == "dog" and rows.loc["0", "judge1_outcome"] == "answerable"
    assert rows.loc["3", "judge1_outcome"] == "unjudged" and "3 call(s)" in rows.loc["3", "judge1_reason"]
    assert len(rows.loc["2", "captions"][1]) == MAX_CAPTION_CHARS
    assert "sk-test-secret-123" not in (scans / "mmstar.judge.json").read_text() + done.stdout + done.stderr
    assert not any("sk-test" in p.read_text() for p in (scans / "judge-cache").rglob("*.json"))


def test_judging_twice_reports_agreement(tmp_path):
    originals, scans = write_scan(tmp_path)
    scripted.retried.clear()
    with LoopbackServer(scripted) as server:
        done = run_judge(scans, originals, "--judge-twice", base_url=server.base_url)
        assert done.returncode == 0, done.stderr
        assert {r["seed"] for r in server.requests} == {0, 1}
    agreement = json.loads((scans / "mmstar.judge.json").read_text())["judge"]["agreement"]
    # Both judges usable on 4 samples (the garbage one is unjudged twice); they differ on the dog.
    assert agreement == {"second": "judge-model (another seed)", "judged_by_both": 4, "agree": 3, "rate": 0.75}
    assert "agreement with judge-model (another seed): 3 of 4" in done.stdout


def test_prefilter_only_needs_no_endpoint(tmp_path):
    originals, scans = write_scan(tmp_path)
    done = run_judge(scans, originals, "--prefilter-only", base_url="http://127.0.0.1:9/v1")
    assert done.returncode == 0, done.stderr
    summary = json.loads((scans / "mmstar.judge.json").read_text())
    assert "judge" not in summary and summary["prefilter_hits"] == 3


def test_another_benchmark_version_or_scan_is_refused(tmp_path):
    originals, scans = write_scan(tmp_path)
    summary_path = scans / "mmstar.summary.json"
    summary = json.loads(summary_path.read_text())
    summary_path.write_text(json.dumps({**summary, "eval_ids_sha256": ids_sha256(["0", "1"])}))
    done = run_judge(scans, originals, "--prefilter-only")
    assert done.returncode == 2 and "embedded another version of mmstar" in done.stderr
    summary_path.write_text(json.dumps({**summary, "benchmark": "realworldqa"}))
    done = run_judge(scans, originals, "--prefilter-only")
    assert done.returncode == 2 and "a scan of 'realworldqa'" in done.stderr
    summary_path.write_text("{truncated")
    done = run_judge(scans, originals, "--prefilter-only")
    assert done.returncode == 2 and f"{summary_path}: not valid JSON" in done.stderr
    assert not (scans / "mmstar.judge.json").exists()


def candidate(options: list[str], answer: str, captions: list[str], stem: str = "Which one?") -> MatchedSample:
    listed = ", ".join(f"{letter}: {text}" for letter, text in zip("ABCD", options, strict=False))
    text = options["ABCD".index(answer)]
    return MatchedSample("mmstar", "1", f"{stem}\nOptions: {listed}", tuple(options), answer, text, tuple(captions),
                     (0.95,) * len(captions))  # fmt: skip


def test_answer_grams_leave_out_shared_and_stop_words():
    assert answer_grams(candidate(["a red car", "a blue car"], "A", [])) == {"red", "a red", "red car"}
    assert answer_grams(candidate(["Yes", "No"], "A", [], "Is there a dog?")) == set()
    # A word the question itself uses says nothing about the answer.
    assert "dog" not in answer_grams(candidate(["dog on grass", "cat"], "A", [], "Where is the dog?"))
    hit = prefilter(candidate(["red", "blue"], "B", ["RED barn", "a Blue door"]))
    assert (hit.caption, hit.gram) == (1, "blue")
    assert prefilter(candidate(["red", "blue"], "B", ["a bluebird"])) is None


def test_report_shows_the_image_text_rate_beside_the_image_only_rate(tmp_path):
    originals, scans = write_scan(tmp_path)
    scripted.retried.clear()
    with LoopbackServer(scripted) as server:
        assert run_judge(scans, originals, base_url=server.base_url).returncode == 0
    report = [sys.executable, "-m", "lmms_contam.cli", "report", "--scans", str(scans)]
    done = subprocess.run([*report, "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (rates,) = json.loads((tmp_path / "r.json").read_text())["rates"]
    assert rates["image_only_rate"] == pytest.approx(6 / 7)
    assert rates["judge"]["judge"]["image_text_rate"] == pytest.approx(2 / 7)
    markdown = subprocess.run(report, capture_output=True, text=True, timeout=300).stdout
    assert "| mmstar | 7 | 85.7 (> 0.9) | 28.6 (up to 42.9; judge-model) | 42.9 | 1 | - |" in markdown
    # A judge summary from another scan (another embedding recipe) is refused, naming the file.
    scan_summary = json.loads((scans / "mmstar.summary.json").read_text())
    (scans / "mmstar.summary.json").write_text(json.dumps({**scan_summary, "recipe": {"family": "other"}}))
    refused = subprocess.run(report, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and f"{scans / 'mmstar.judge.json'}: made from another scan" in refused.stderr
