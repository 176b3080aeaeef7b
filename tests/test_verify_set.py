"""`lmms-contam verify`: an imported (unverified) set judged through a loopback OpenAI-compatible server
with scripted verdicts; the kept subset is what the tasks then read and what the report calls verified."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pytest
import yaml
from conftest import metric, run_lmms_eval
from fixtures import mmstar_rows, real_photos
from loopback import LoopbackServer, completion

from lmms_contam.schema import write_parquet

pytestmark = pytest.mark.slow
CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "perturb"
# Item 9's reply names two options in one string, as a server that ignores response_format may: no verdict, as
# item 10's prose is not. Item 11: the image left unchanged.
REJECTED = {3: "wrong", 5: "wrong", 7: "wrong", 8: "ambiguous", 9: "two in one string", 10: "garbage"}
UNUSABLE = 2  # replies that are no verdict: counted as failed calls, asked again on every run
KEPT = sorted(set(range(12)) - set(REJECTED) - {11})


def scripted(delay: float = 0.0):
    rows = {int(r["original_id"]): r for r in mmstar_rows(real_photos())}

    def script(body, _number):
        text = body["messages"][0]["content"][1]["text"]
        item = int(re.search(r"object (\d+)-0", text)[1])
        new = rows[item]["new_answer"]
        plan = REJECTED.get(item)
        if plan == "garbage":
            return 200, completion("I cannot decide."), delay
        other = next(x for x in "ABCD" if x != new)
        letters = {"wrong": [other], "ambiguous": ["A", "B", "C"], "two in one string": [f"{new}, {other}"]}.get(
            plan, [new]
        )
        return 200, completion(json.dumps({"correct_options": letters, "reason": "scripted"})), delay

    return script


@pytest.fixture
def imported(tmp_path) -> Path:
    """The fixture's MMStar set as `import mm-perturb` leaves it: data.parquet and an unverified manifest."""
    rows = mmstar_rows(real_photos())
    rows[11]["image"] = rows[11]["original_image"]  # an edit that changed nothing
    folder = tmp_path / "mmstar"
    write_parquet(rows, "mmstar", folder / "data.parquet")
    manifest = {"kind": "lmms-contam import mm-perturb", "verification": {"verified": False, "kept": 12, "of": 12,
                "by": "none: the authors' release is unfiltered"}}  # fmt: skip
    (folder / "data.manifest.json").write_text(json.dumps(manifest))
    return folder


def recipe(tmp_path: Path, server: LoopbackServer, concurrency: int = 4) -> Path:
    endpoint = {"base_url": server.base_url, "api_key_env": "LMMS_CONTAM_TEST_KEY", "max_retries": 0,
                "concurrency": concurrency}  # fmt: skip
    variant = {
        "base": str(CONFIGS / "flux_canny.yaml"),
        "verify": {"judge": {"endpoint": endpoint}, "drift": {"min_change": 0.001, "min_resemblance": -1.0}},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(variant))
    return path


def verify(*args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "verify", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LMMS_CONTAM_TEST_KEY": "sk-test-verify-0123456789", **env})  # fmt: skip


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
