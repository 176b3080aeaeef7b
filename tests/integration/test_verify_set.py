"""`lmms-contam verify`: an imported (unverified) set judged through a loopback OpenAI-compatible server
with scripted verdicts; the kept subset is what the tasks then read and what the report calls verified."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import datasets
from helpers.harness import metric, run_lmms_eval
from helpers.loopback import LoopbackServer
from helpers.verify_runs import KEPT, UNUSABLE, recipe, scripted, verify


def test_verify_keeps_exactly_the_valid_counterfactuals_and_the_tasks_read_them(imported, tmp_path, monkeypatch):
    with LoopbackServer(scripted()) as server:
        config = recipe(tmp_path, server)
        done = verify(str(imported), "--config", str(config))
        assert done.returncode == 0, done.stderr
        calls = len(server.requests)
        again = verify(str(imported), "--config", str(config))
        assert again.returncode == 0 and len(server.requests) == calls + UNUSABLE, "a rerun asked a verdict again"
        # A human overrules the judge on one item: the next run applies it without a call.
        review_path = imported / "verified" / "review.json"
        review = json.loads(review_path.read_text())
        review["mmstar-3"]["decision"] = "keep"
        review_path.write_text(json.dumps(review))
        overruled = verify(str(imported), "--config", str(config))
        assert overruled.returncode == 0 and len(server.requests) == calls + 2 * UNUSABLE
    assert calls == 12 and f"kept {len(KEPT)} of 12 items" in done.stdout
    assert "4: judge: reject" in done.stdout  # 3 wrong + 1 ambiguous
    assert f"{UNUSABLE}: judge failed: unusable reply" in done.stdout and "1: reject: unchanged" in done.stdout
    assert f"kept {len(KEPT) + 1} of 12" in overruled.stdout and "1: human: keep" in overruled.stdout
    review["mmstar-3"]["decision"] = "auto"
    review_path.write_text(json.dumps(review))
    with LoopbackServer(scripted()) as server:  # another server: every verdict is asked again
        assert verify(str(imported), "--config", str(recipe(tmp_path, server))).returncode == 0
        assert len(server.requests) == 12
    subset = datasets.load_dataset("parquet", data_files=str(imported / "verified" / "data.parquet"), split="train")
    assert sorted(int(i) for i in subset["original_id"]) == KEPT
    manifest = json.loads((imported / "verified" / "data.manifest.json").read_text())
    assert manifest["verification"] == {"verified": True, "kept": len(KEPT), "of": 12,
                                        "by": "lmms-contam verify (judge o3 and the drift check)"}  # fmt: skip
    assert "sk-test-verify" not in json.dumps(manifest)
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(imported))
    run = run_lmms_eval(["--model", "contam_test_memoriser", "--tasks", "mmstar_contam"], tmp_path / "out")
    assert metric(run, "mmstar_contam", "n_pairs") == len(KEPT), run.output[-3000:]
    assert "its verified subset" in run.output
    report = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "report", str(tmp_path / "out"), "--json",
                             str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert report.returncode == 0, report.stderr
    (result,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert (result["set"]["verified"], result["set"]["kept"], result["set"]["of"]) == (True, len(KEPT), 12)


def test_the_report_says_a_verdict_rests_on_an_unverified_set(imported, tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(imported))
    run_lmms_eval(["--model", "contam_test_memoriser", "--tasks", "mmstar_contam"], tmp_path / "out")
    done = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "report", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| contaminated | NOT verified |" in done.stdout
    assert "mmstar: NOT verified (none: the authors' release is unfiltered): a negative delta may come from flawed " \
           "counterfactuals rather than memorisation" in done.stdout  # fmt: skip


def _as_in_a_terminal() -> None:
    """Ctrl-C reaches the command as in a terminal, even where this suite runs as a background job (whose
    children inherit SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_verify_then_rerun_repeats_no_finished_call(imported, tmp_path):
    with LoopbackServer(scripted(delay=0.3)) as server:
        config = recipe(tmp_path, server, concurrency=1)
        env = {**os.environ, "LMMS_CONTAM_TEST_KEY": "sk-test"}
        command = [sys.executable, "-m", "lmms_contam.cli", "verify", str(imported), "--config", str(config)]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_as_in_a_terminal)  # fmt: skip
        while len(server.requests) < 5:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        interrupted = len(server.requests)
        assert interrupted < 12 and not (imported / "verified" / "data.parquet").exists()
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert err.strip().splitlines()[-1].startswith("lmms-contam verify: interrupted;"), err
        done = verify(str(imported), "--config", str(config))
        assert done.returncode == 0, done.stderr
    # At most the call in flight at Ctrl-C, and the unusable replies asked before it, are asked again.
    assert len(server.requests) <= 12 + 1 + UNUSABLE
    assert f"kept {len(KEPT)} of 12" in done.stdout
