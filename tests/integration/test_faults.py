"""Fault injection, table-driven, for every command that reads user files or resumes: scan, embed-corpus,
judge, perturb, import mm-perturb and report.

Each row damages or changes one input and names the outcome it must have:
- refused: exit 2, the file (and line or row) named on stderr, no traceback, no output written;
- recomputed: the rerun into the same output folder equals a fresh run on the changed inputs;
- resumed: killed with SIGKILL at a random point (seeded from the row's name), then rerun: the output
  equals an uninterrupted run's, and no temporary file is left.
Refused and recomputed rows run the command in this process (`lmms_contam.cli.main`, what the console
script calls); killed runs are real subprocesses.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.benchmark_copies import write_corpus_folder
from helpers.fixtures import point_at_sets, real_photos
from helpers.harness import run_lmms_eval
from helpers.judge_scans import ITEMS, write_scan
from helpers.loopback import LoopbackServer, completion
from helpers.loopback_github import LoopbackGitHub
from helpers.paths import CONFIGS, PACKAGE_CONFIGS
from helpers.perturb_runs import SECRET, dataset_rows, judge_script, perturb, write_config
from helpers.verify_runs import KEPT, recipe, scripted, verify
from PIL import Image, ImageOps

from lmms_contam.benchmarks.mm_perturb_release import REPOSITORY, TAG
from lmms_contam.cli import main
from lmms_contam.corpus.embed import EfficientNetLite0Embedder
from lmms_contam.corpus.ingest import embed_corpus
from lmms_contam.corpus.shards import open_corpus
from lmms_contam.perturb.config import read_recipe

EMBEDDER = ["--embedder", "efficientnet-lite0"]


@dataclass(frozen=True)
class Fault:
    name: str
    change: Callable[[Path], object]  # applied to a copy of the inputs
    expected: str = ""  # refused: text stderr must hold (a path or line, relative to the inputs' folder)


def arguments(changed: object) -> list[str]:
    """What a change adds to the command line: the list it returned, if it returned one."""
    return changed if isinstance(changed, list) else []


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    """The console script's entry point in this process: (exit code, stderr)."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def assert_refused(code: int, err: str, expected: str, outputs: list[Path]) -> None:
    assert code == 2, err
    assert expected in err, err
    assert "Traceback" not in err
    assert not [path for path in outputs if path.exists()], "a refused run wrote output"


def killed_then_rerun(argv: list[str], seconds: float, seed: str, env: dict | None = None,
                      requests: Callable[[], int] | None = None) -> tuple[int, str]:  # fmt: skip
    """Three runs killed with SIGKILL at random points, then one run to the end: (kills that landed, the last
    run's stderr). A point is a random time within an uninterrupted run's `seconds`; or, given a count of
    the API requests a server received, the arrival of the 1st to 4th request of that run (drawn at random),
    which lands inside the work however fast or slow the machine is."""
    rng = random.Random(int(hashlib.sha256(seed.encode()).hexdigest(), 16))
    kills = 0
    for _ in range(3):
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if requests is None:
            time.sleep(rng.uniform(0.15, 0.75) * seconds)
        else:
            target = requests() + rng.randint(1, 4)
            while requests() < target and proc.poll() is None:
                time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr
    return kills, final.stderr


def timed(argv: list[str], env: dict | None = None) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - start


def command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "lmms_contam.cli", *map(str, argv)]


def no_temporary_files(folder: Path) -> None:
    assert not list(folder.rglob("*.tmp")), "a temporary file was left behind"


# ---------------------------------------------------------------- scan


@pytest.fixture(scope="module")
def scan_inputs(tmp_path_factory) -> Path:
    """A corpus embedded in three shards (copies of photos 0-7 among unrelated photos) and an eval folder."""
    root = tmp_path_factory.mktemp("scan-inputs")
    embed_corpus(write_corpus_folder(root / "corpus-images"), root / "corpus", EfficientNetLite0Embedder(),
                 shard_size=4)  # fmt: skip
    (root / "eval").mkdir()
    for i, data in enumerate(real_photos(size=128)[:10]):
        (root / "eval" / f"{i:02d}.png").write_bytes(data)
    return root


def _scan_argv(root: Path, out: Path, *extra: str) -> list:
    return ["scan", "--corpus", root / "corpus", "--eval-folder", root / "eval", "--out", out, *EMBEDDER,
            "--k", "3", *extra]  # fmt: skip


def _scan_outcome(out: Path) -> tuple:
    matches = pd.read_parquet(out / "eval.matches.parquet")
    summary = json.loads((out / "eval.summary.json").read_text())
    return (matches.drop(columns=["top_similarities", "max_similarity"]).to_json(),
            np.round(np.stack(matches["top_similarities"]), 5).tolist(), summary)  # fmt: skip


def _nan_row(root: Path) -> None:
    shard = root / "corpus" / "img_emb" / "img_emb_1.npy"
    vectors = np.load(shard)
    vectors[2, 5] = np.nan
    np.save(shard, vectors)


def _scaled_rows(root: Path) -> None:
    """Defect 7: vectors that are not unit length, though recipe.json says normalized."""
    shard = root / "corpus" / "img_emb" / "img_emb_1.npy"
    np.save(shard, np.load(shard) * np.float16(5.9))


def _integer_shard(root: Path) -> None:
    shard = root / "corpus" / "img_emb" / "img_emb_1.npy"
    np.save(shard, np.round(np.load(shard) * 100).astype(np.int64))


def _stray_copy(root: Path) -> None:
    """Defect 8: an old copy of a shard in a subfolder was scanned as another shard."""
    (root / "corpus" / "old").mkdir()
    shutil.copyfile(root / "corpus" / "img_emb" / "img_emb_0.npy", root / "corpus" / "old" / "img_emb_0.npy")


def _linked_shard(root: Path) -> None:
    """A public dump (no completion record) with a link to a shard under the next number: scanned twice, its
    matches were counted twice under two ids (fourth probe)."""
    (root / "corpus" / "corpus.json").unlink()
    shutil.rmtree(root / "corpus" / "shards")
    (root / "corpus" / "img_emb" / "img_emb_3.npy").symlink_to("img_emb_0.npy")


def _dump_with_a_gap(root: Path) -> None:
    """A public dump (no completion record) copied in part: shard 1 and its metadata missing."""
    for path in ("corpus.json", "img_emb/img_emb_1.npy", "metadata/metadata_1.parquet"):
        (root / "corpus" / path).unlink()
    shutil.rmtree(root / "corpus" / "shards")


def _replace_rows(root: Path) -> None:
    """Another corpus under the same shard names: shard 1's rows rolled (same size and shape)."""
    shard = root / "corpus" / "img_emb" / "img_emb_1.npy"
    np.save(shard, np.roll(np.load(shard), 1, axis=0))


def _shorten(root: Path) -> None:
    """A shorter corpus: the last shard keeps one row (the old code failed in the caption lookup)."""
    shard, metadata = root / "corpus" / "img_emb" / "img_emb_2.npy", root / "corpus" / "metadata" / "metadata_2.parquet"
    np.save(shard, np.load(shard)[:1])
    pd.read_parquet(metadata).iloc[:1].to_parquet(metadata)


def _add_image(root: Path) -> None:
    (root / "eval" / "10.png").write_bytes(real_photos(size=128)[3])  # a copy of a corpus photo


def _replace_image(root: Path) -> None:
    """An unrelated photo replaced by a mirrored copy of a corpus photo, under the same name."""
    ImageOps.mirror(Image.open(io.BytesIO(real_photos(size=128)[0]))).save(root / "eval" / "09.png")


SCAN_REFUSED = [
    Fault("truncated recipe", lambda r: (r / "corpus/recipe.json").write_text('{"family": "eff'),
          "corpus/recipe.json: not a valid recipe"),
    Fault("truncated shard", lambda r: (r / "corpus/img_emb/img_emb_1.npy").write_bytes(b"\x93NUMPY\x01"),
          "img_emb_1.npy: not a readable .npy array"),
    Fault("damaged metadata", lambda r: (r / "corpus/metadata/metadata_1.parquet").write_text("garbage"),
          "metadata_1.parquet: not a readable parquet file"),
    Fault("NaN in a shard", _nan_row, "img_emb_1.npy: corpus row 6 holds NaN"),
    Fault("vectors not of unit length", _scaled_rows, "img_emb_1.npy: corpus row 4 has length 5.8"),
    Fault("an integer shard", _integer_shard, "img_emb_1.npy: int64 array"),
    Fault("a stray copy of a shard", _stray_copy, "corpus/old/img_emb_0.npy: a shard outside the corpus's layout"),
    Fault("a shard cut shorter by hand", _shorten, "corpus/corpus.json: the run that wrote this corpus made 10"),
    Fault("a shard deleted", lambda r: (r / "corpus/img_emb/img_emb_2.npy").unlink(),
          "corpus/corpus.json: the run that wrote this corpus made 10 vectors"),
    Fault("a shard named in capitals", lambda r: (r / "corpus/img_emb/img_emb_1.npy").rename(
          r / "corpus/img_emb/img_emb_1.NPY"), "img_emb/img_emb_1.NPY: looks like a shard but is not named"),
    Fault("a gap in a dump's shards", _dump_with_a_gap, "corpus: shard(s) 1 missing"),
    Fault("a shard linked to another", _linked_shard, "img_emb/img_emb_3.npy: the same file as"),
    Fault("unfinished embed-corpus", lambda r: (r / "corpus/corpus.json").unlink(), "corpus: incomplete"),
    Fault("undecodable eval image", lambda r: (r / "eval/03.png").write_text("garbage"),
          "eval/03.png: unreadable image (not an image format PIL can read)"),
    Fault("empty eval image", lambda r: (r / "eval/04.png").write_bytes(b""), "eval/04.png: empty file"),
]  # fmt: skip
SCAN_CHANGED = [
    Fault("another corpus, same shard names", _replace_rows),
    Fault("an image added to the eval folder", _add_image),
    Fault("an eval image replaced", _replace_image),
    Fault("another threshold", lambda r: ["--threshold", "0.3"]),
    Fault("another k", lambda r: ["--k", "2"]),
]


@pytest.mark.parametrize("fault", SCAN_REFUSED, ids=lambda f: f.name)
def test_scan_refuses_damaged_inputs(fault, scan_inputs, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(scan_inputs, root)
    fault.change(root)
    code, err = run_cli(capsys, *_scan_argv(root, tmp_path / "out"))
    assert_refused(code, err, fault.expected, [tmp_path / "out" / "eval.summary.json",
                                               tmp_path / "out" / "eval.matches.parquet"])  # fmt: skip


@pytest.mark.parametrize("fault", SCAN_CHANGED, ids=lambda f: f.name)
def test_scan_recomputes_what_a_changed_input_affects(fault, scan_inputs, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(scan_inputs, root)
    assert run_cli(capsys, *_scan_argv(root, tmp_path / "out"))[0] == 0
    before = _scan_outcome(tmp_path / "out")
    extra = arguments(fault.change(root))
    assert run_cli(capsys, *_scan_argv(root, tmp_path / "out", *extra))[0] == 0
    assert run_cli(capsys, *_scan_argv(root, tmp_path / "fresh", *extra))[0] == 0
    rerun = _scan_outcome(tmp_path / "out")
    assert rerun == _scan_outcome(tmp_path / "fresh")
    assert rerun != before, "the change should have changed the result"


def test_scan_refuses_an_unreachable_ray_cluster_within_seconds(scan_inputs, tmp_path, capsys):
    """Ray itself retried an address with nothing behind it for minutes."""
    started = time.monotonic()
    code, err = run_cli(capsys, *_scan_argv(scan_inputs, tmp_path / "out", "--ray", "127.0.0.1:9"))
    assert time.monotonic() - started < 15
    assert_refused(code, err, "--ray 127.0.0.1:9: no Ray cluster answers there within 10 s", [tmp_path / "out"])


def test_scan_killed_then_rerun_equals_an_uninterrupted_scan(scan_inputs, tmp_path):
    argv = command(*_scan_argv(scan_inputs, tmp_path / "killed"))
    seconds = timed(command(*_scan_argv(scan_inputs, tmp_path / "whole")))
    kills, _ = killed_then_rerun(argv, seconds, "scan")
    assert kills >= 1
    assert _scan_outcome(tmp_path / "killed") == _scan_outcome(tmp_path / "whole")
    no_temporary_files(tmp_path / "killed")


# ---------------------------------------------------------------- embed-corpus


def _corpus_outcome(out: Path) -> tuple:
    shards, recipe = open_corpus(out)
    vectors = np.round(np.concatenate([np.load(s.vectors) for s in shards]), 5).tolist()
    metadata = [pd.read_parquet(s.metadata).to_dict("records") for s in shards]
    return vectors, metadata, [s.rows for s in shards], recipe


def _embed_argv(source: Path, out: Path, *extra: str) -> list:
    return ["embed-corpus", source, "--out", out, *EMBEDDER, "--shard-size", "4", *extra]


def _tar_of(root: Path, cut: int | None = None) -> list[str]:
    import tarfile

    with tarfile.open(root / "shard.tar", "w") as archive:
        for path in sorted((root / "src").iterdir()):
            archive.add(path, arcname=path.name)
    if cut:
        data = (root / "shard.tar").read_bytes()
        (root / "shard.tar").write_bytes(data[:cut])
    return ["shard.tar"]


def _remove_images(root: Path, photos: tuple[int, ...]) -> None:
    for photo in photos:
        (root / "src" / f"copy{photo}.jpg").unlink()
        (root / "src" / f"copy{photo}.txt").unlink()


def _broken_json_sidecar(root: Path) -> None:
    (root / "src" / "copy1.txt").unlink()
    (root / "src" / "copy1.json").write_text("{not json")


EMBED_REFUSED = [
    Fault("a .json sidecar that is not JSON", _broken_json_sidecar, "src/copy1.json: unreadable caption sidecar"),
    Fault("a caption that is not UTF-8", lambda r: (r / "src/copy2.txt").write_bytes(b"\xff\xfe bad"),
          "src/copy2.txt: unreadable caption sidecar"),
    Fault("a truncated tar shard", lambda r: _tar_of(r, cut=30_000), "shard.tar: truncated tar archive"),
    Fault("a damaged parquet source", lambda r: ((r / "rows.parquet").write_text("garbage"), ["rows.parquet"])[1],
          "rows.parquet: not a readable parquet file"),
    Fault("no such source", lambda r: ["missing"], "missing: no such file or folder"),
]  # fmt: skip
EMBED_CHANGED = [
    Fault("an image replaced under its name",
          lambda r: shutil.copy(r / "src" / "unrelated0.jpg", r / "src" / "copy3.jpg")),
    Fault("images removed (the source shrank by a shard)", lambda r: _remove_images(r, (4, 5, 6))),
    Fault("a caption changed", lambda r: (r / "src" / "copy0.txt").write_text("another caption")),
    Fault("another shard size", lambda r: ["--shard-size", "3"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def embed_inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("embed-inputs")
    write_corpus_folder(root / "src")
    return root


@pytest.mark.parametrize("fault", EMBED_REFUSED, ids=lambda f: f.name)
def test_embed_corpus_refuses_damaged_inputs(fault, embed_inputs, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(embed_inputs, root)
    source = root / (arguments(fault.change(root)) or ["src"])[0]
    out = tmp_path / "out"
    code, err = run_cli(capsys, *_embed_argv(source, out))
    assert_refused(code, err, fault.expected, [out / "corpus.json"])
    if (out / "shards").exists():  # shards written before the damage are never taken for a whole corpus
        with pytest.raises(ValueError, match="incomplete"):
            open_corpus(out)


@pytest.mark.parametrize("fault", EMBED_CHANGED, ids=lambda f: f.name)
def test_embed_corpus_recomputes_what_a_changed_input_affects(fault, embed_inputs, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(embed_inputs, root)
    assert run_cli(capsys, *_embed_argv(root / "src", tmp_path / "out"))[0] == 0
    before = _corpus_outcome(tmp_path / "out")
    extra = arguments(fault.change(root))
    assert run_cli(capsys, *_embed_argv(root / "src", tmp_path / "out", *extra))[0] == 0
    assert run_cli(capsys, *_embed_argv(root / "src", tmp_path / "fresh", *extra))[0] == 0
    rerun = _corpus_outcome(tmp_path / "out")
    assert rerun == _corpus_outcome(tmp_path / "fresh")
    assert rerun != before


def test_embed_corpus_killed_then_rerun_equals_an_uninterrupted_run(embed_inputs, tmp_path):
    seconds = timed(command(*_embed_argv(embed_inputs / "src", tmp_path / "whole", "--shard-size", "2")))
    kills, _ = killed_then_rerun(command(*_embed_argv(embed_inputs / "src", tmp_path / "killed", "--shard-size",
                                                      "2")), seconds, "embed-corpus")  # fmt: skip
    assert kills >= 1
    assert _corpus_outcome(tmp_path / "killed") == _corpus_outcome(tmp_path / "whole")
    no_temporary_files(tmp_path / "killed")


# ---------------------------------------------------------------- judge


def _judge_argv(root: Path, base_url: str, *extra: str) -> list:
    return ["judge", root / "scans", "--benchmark", "mmstar", "--originals", root / "mmstar.parquet", "--model",
            "judge-model", "--base-url", base_url, "--concurrency", "2", *extra]  # fmt: skip


def _always(answerable: bool):
    def script(body, _number):
        return 200, completion(json.dumps({"answerable": answerable, "caption": 1 if answerable else 0,
                                           "reason": hashlib.sha256(body["messages"][0]["content"].encode())
                                           .hexdigest()[:12]})), 0.0  # fmt: skip

    return script


def _judge_outcome(root: Path) -> tuple:
    rows = pd.read_parquet(root / "scans" / "mmstar.judge.parquet")
    summary = json.loads((root / "scans" / "mmstar.judge.json").read_text())
    return rows.to_json(), summary["judge"]["counts"], summary["judge"]["image_text_rate"]


def _edit_caption(root: Path) -> None:
    path = root / "scans" / "mmstar.matches.parquet"
    matches = pd.read_parquet(path)
    matches.at[1, "top_captions"] = ["a red vintage car parked outside", *list(matches.at[1, "top_captions"])[1:]]
    matches.to_parquet(path)


def _edit_template(root: Path) -> list[str]:
    template = PACKAGE_CONFIGS / "judge" / "caption_judge.txt"
    (root / "template.txt").write_text(template.read_text() + "\nBe strict.\n")
    return ["--template", str(root / "template.txt")]


JUDGE_REFUSED = [
    Fault("damaged matches", lambda r: (r / "scans/mmstar.matches.parquet").write_text("garbage"),
          "mmstar.matches.parquet: not a readable parquet file"),
    Fault("matches of fewer images", lambda r: pd.read_parquet(r / "scans/mmstar.matches.parquet").iloc[:3]
          .to_parquet(r / "scans/mmstar.matches.parquet"), "mmstar.matches.parquet: 3 rows"),
    Fault("a summary that is a list", lambda r: (r / "scans/mmstar.summary.json").write_text("[]"),
          "mmstar.summary.json: a JSON object was expected"),
    Fault("a truncated summary", lambda r: (r / "scans/mmstar.summary.json").write_text('{"scan_version": 1'),
          "mmstar.summary.json: not valid JSON"),
    Fault("a damaged benchmark copy", lambda r: (r / "mmstar.parquet").write_text("garbage"),
          "mmstar.parquet: not a readable dataset copy"),
]  # fmt: skip
JUDGE_CHANGED = [  # (change, samples asked again)
    (Fault("a matched caption changed", _edit_caption), 1),
    (Fault("another prompt template", _edit_template), 5),
    (Fault("another judge model", lambda r: ["--model", "judge-model-2"]), 5),
]


@pytest.fixture
def judge_inputs(tmp_path) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    write_scan(root)
    return root


@pytest.mark.parametrize("fault", JUDGE_REFUSED, ids=lambda f: f.name)
def test_judge_refuses_damaged_inputs(fault, judge_inputs, capsys):
    fault.change(judge_inputs)
    code, err = run_cli(capsys, *_judge_argv(judge_inputs, "http://127.0.0.1:9/v1", "--prefilter-only"))
    scans = judge_inputs / "scans"
    assert_refused(code, err, fault.expected, [scans / "mmstar.judge.json", scans / "mmstar.judge.parquet"])


@pytest.mark.parametrize(("fault", "asked"), JUDGE_CHANGED, ids=lambda f: getattr(f, "name", ""))
def test_judge_asks_again_exactly_what_a_change_affects(fault, asked, judge_inputs, tmp_path, capsys):
    with LoopbackServer(_always(True)) as server:
        assert run_cli(capsys, *_judge_argv(judge_inputs, server.base_url))[0] == 0
        assert len(server.requests) == 5  # five samples with captioned matches
        extra = arguments(fault.change(judge_inputs))
        assert run_cli(capsys, *_judge_argv(judge_inputs, server.base_url, *extra))[0] == 0
        assert len(server.requests) == 5 + asked
        fresh = tmp_path / "fresh"
        shutil.copytree(judge_inputs, fresh)
        shutil.rmtree(fresh / "scans" / "judge-cache")
        assert run_cli(capsys, *_judge_argv(fresh, server.base_url, *extra))[0] == 0
    assert _judge_outcome(judge_inputs) == _judge_outcome(fresh)


def test_judge_fails_loudly_when_the_calls_fail_and_never_stores_the_key(judge_inputs, monkeypatch, capsys):
    """Every call refused (a server that echoes the key), then one in five failing with a limit of 10%."""
    secret = "sk-live-a1b2c3d4e5f6g7h8i9"
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    def refuse(body, _number):
        return 401, {"error": {"message": f"Incorrect API key provided: {secret}", "type": "invalid_request_error",
                               "code": "invalid_api_key"}}, 0.0  # fmt: skip

    with LoopbackServer(refuse) as server:
        code, err = run_cli(capsys, *_judge_argv(judge_inputs, server.base_url))
    assert code == 1 and "every API call failed (5 item(s))" in err and "AuthenticationError" in err
    scans = judge_inputs / "scans"
    summary = json.loads((scans / "mmstar.judge.json").read_text())
    assert summary["judge"]["complete"] is False and summary["judge"]["counts"] == {"unjudged": 5}
    stored = (scans / "mmstar.judge.json").read_text() + pd.read_parquet(scans / "mmstar.judge.parquet").to_json()
    assert "API error: AuthenticationError" in stored
    assert secret not in stored + err and not any(secret in p.read_text() for p in scans.rglob("*.json"))
    code, err = run_cli(capsys, "report", "--scans", scans, "--markdown", judge_inputs / "rates.md")
    assert code == 0, err
    assert "none: the judge's API calls failed" in (judge_inputs / "rates.md").read_text()
    from lmms_contam.corpus.scan_files import ScanOutputError
    from lmms_contam.flags import read_flags

    with pytest.raises(ScanOutputError, match="the judge's API calls failed"):
        read_flags(scans, "mmstar", 0.9, [str(i) for i in range(len(ITEMS))])

    def one_fails(body, number):  # a status the SDK does not retry
        if "What colour is the car?" in body["messages"][0]["content"]:
            return 400, {"error": {"message": "context too long"}}, 0.0
        return _always(False)(body, number)

    with LoopbackServer(one_fails) as server:
        argv = _judge_argv(judge_inputs, server.base_url, "--model", "judge-model-3")
        assert run_cli(capsys, *argv)[0] == 0  # 1 of 5 failed: under the default 50%
        code, err = run_cli(capsys, *argv, "--max-failure-rate", "0.1")  # 4 stored, the same 1 fails again
    assert code == 1 and "1 of 5 item(s) failed, more than the allowed 10%" in err


def test_judge_killed_then_rerun_equals_an_uninterrupted_run(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    for root in (whole, killed):
        root.mkdir()
        write_scan(root)

    def slow(body, number):
        status, payload, _ = _always(True)(body, number)
        return status, payload, 0.4

    env = {**os.environ, "OPENAI_API_KEY": "sk-loopback"}
    with LoopbackServer(slow) as server:
        seconds = timed(command(*_judge_argv(whole, server.base_url, "--concurrency", "1")), env)
        calls = len(server.requests)
        kills, _ = killed_then_rerun(command(*_judge_argv(killed, server.base_url, "--concurrency", "1")), seconds,
                                     "judge", env, requests=lambda: len(server.requests))  # fmt: skip
        resumed = len(server.requests) - calls
    assert kills >= 1 and calls <= resumed <= calls + kills  # only a call in flight at a kill is repeated
    assert _judge_outcome(killed) == _judge_outcome(whole)
    no_temporary_files(killed)


# ---------------------------------------------------------------- perturb


def _perturb_argv(config: str, out: Path, parquet: Path, *extra: str) -> list:
    return ["perturb", "mmstar", "--config", config, "--out", out, "--originals", parquet, *extra]


def _perturb(config: str, out: Path, parquet: Path) -> tuple[int, str]:
    """A subprocess: the hub cache holding the tiny Flux is found through the environment at import."""
    done = perturb(*map(str, _perturb_argv(config, out, parquet)[1:]))
    return done.returncode, done.stderr


def _with_judge_model(config: str, model: str) -> str:
    recipe = yaml.safe_load(Path(config).read_text())
    recipe["verify"]["judge"]["endpoint"]["model"] = model
    path = Path(config).with_name(f"recipe-{model}.yaml")
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


def _with_caption_template(config: str) -> str:
    recipe = yaml.safe_load(Path(config).read_text())
    template = Path(read_recipe(Path(config))["caption"]["template"])  # the template its base names
    changed = Path(config).with_name("edit_caption_v2.txt")
    changed.write_text(template.read_text() + "\nKeep it short.\n")
    recipe["caption"]["template"] = str(changed)
    path = Path(config).with_name(f"{Path(config).stem}-template.yaml")
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


def _with_one_image_changed(parquet: Path, folder: Path) -> Path:
    rows = datasets.load_dataset("parquet", data_files=str(parquet), split="train").to_list()
    mirrored = io.BytesIO()
    ImageOps.mirror(Image.open(io.BytesIO(rows[4]["image"]["bytes"]))).save(mirrored, format="PNG")
    rows[4]["image"] = {"bytes": mirrored.getvalue()}
    changed = folder / "mmstar-changed.parquet"
    datasets.Dataset.from_list(rows).cast_column("image", datasets.Image()).to_parquet(str(changed))
    return changed


def test_perturb_redoes_exactly_the_stages_a_change_affects(originals, flux, tmp_path):
    """Each change in turn, into the same output folder: the API calls it must repeat, and a set equal to a
    fresh run's on the changed inputs."""
    parquet, expected = originals
    out = tmp_path / "out"
    with LoopbackServer(judge_script(expected, ambiguous="")) as server:
        config = write_config(tmp_path, server, flux)
        assert _perturb(config, out, parquet)[0] == 0
        other_judge = _with_judge_model(config, "o4")
        other_template = _with_caption_template(other_judge)  # each change on top of the one before
        changes = [  # (name, recipe, originals, captions asked again, verdicts asked again; None: one per
            # item whose edited image changed, since a verdict is of the edited image)
            ("another judge model", other_judge, parquet, 0, 12),
            ("another caption template", other_template, parquet, 12, None),
            ("one original image changed", other_template, _with_one_image_changed(parquet, tmp_path), 1, None),
        ]
        for number, (name, recipe, copy, captions, verdicts) in enumerate(changes):
            before, images = len(server.requests), dataset_rows(out / "data.parquet")
            assert _perturb(recipe, out, copy)[0] == 0, name
            edited = len(set(dataset_rows(out / "data.parquet")) - set(images))
            assert len(server.requests) - before == captions + (edited if verdicts is None else verdicts), name
            fresh = tmp_path / f"fresh-{number}"
            assert _perturb(recipe, fresh, copy)[0] == 0, name
            assert dataset_rows(out / "data.parquet") == dataset_rows(fresh / "data.parquet"), name


def test_perturb_writes_no_set_when_the_endpoint_fails(originals, flux, tmp_path):
    parquet, expected = originals
    out = tmp_path / "out"

    def refuse(body, _number):
        return 401, {"error": {"message": f"bad key {SECRET}", "code": "invalid_api_key"}}, 0.0

    with LoopbackServer(judge_script(expected, ambiguous="")) as good:
        assert _perturb(write_config(tmp_path, good, flux), out, parquet)[0] == 0
    assert (out / "data.parquet").exists()
    with LoopbackServer(refuse) as bad:  # another server: nothing stored is reused, every call fails
        recipe = write_config(tmp_path, bad, flux)
        code, err = _perturb(recipe, out, parquet)
    assert code == 1 and "caption: every API call failed (12 item(s))" in err and "no set written" in err
    assert not (out / "data.parquet").exists(), "an earlier set must not stand for this run"
    manifest = json.loads((out / "data.manifest.json").read_text())
    assert manifest["complete"] is False and manifest["api_calls"]["caption"]["failed"] == 12
    written = err + "".join(p.read_text() for p in out.rglob("*.json"))
    assert SECRET not in written and "[redacted]" in manifest["api_calls"]["caption"]["first_error"]


def test_perturb_refuses_a_damaged_benchmark_copy(tmp_path, capsys):
    damaged = tmp_path / "mmstar.parquet"
    damaged.write_text("garbage")
    config = CONFIGS / "perturb" / "flux_canny.yaml"
    code, err = run_cli(capsys, *_perturb_argv(str(config), tmp_path / "out", damaged))
    assert_refused(code, err, f"{damaged}: not a readable dataset copy", [tmp_path / "out"])


def test_perturb_killed_then_rerun_gives_the_uninterrupted_set(originals, flux, tmp_path):
    """Killed three times mid-run, then rerun to the end: the same set, and only calls in flight repeat."""
    parquet, expected = originals
    env = {**os.environ, "LMMS_CONTAM_TEST_KEY": SECRET}
    script = judge_script(expected, ambiguous="")

    def slow(body, n):  # a little latency so kills land inside API stages too
        status, payload, _ = script(body, n)
        return status, payload, 0.15

    with LoopbackServer(slow) as server:
        recipe = yaml.safe_load(Path(write_config(tmp_path, server, flux)).read_text())
        for section in (recipe["caption"], recipe["verify"]["judge"]):
            section["endpoint"]["concurrency"] = 1  # at most one call in flight when killed
        serial = tmp_path / "recipe-serial.yaml"
        serial.write_text(yaml.safe_dump(recipe))
        seconds = timed(command(*_perturb_argv(str(serial), tmp_path / "whole", parquet)), env)
        calls = len(server.requests)
        kills, _ = killed_then_rerun(command(*_perturb_argv(str(serial), tmp_path / "killed", parquet)), seconds,
                                     "perturb", env, requests=lambda: len(server.requests))  # fmt: skip
        resumed = len(server.requests) - calls
    assert kills == 3 and calls <= resumed <= calls + kills
    assert dataset_rows(tmp_path / "killed" / "data.parquet") == dataset_rows(tmp_path / "whole" / "data.parquet")
    no_temporary_files(tmp_path / "killed")


# ---------------------------------------------------------------- import mm-perturb


def _import_argv(root: Path, out: Path) -> list:
    return ["import", "mm-perturb", "--tsv", root / "MMStar_pert_local.tsv", "--images", root / "images",
            "--originals", root / "mmstar.parquet", "--out", out]  # fmt: skip


def _cut_tsv(root: Path) -> None:
    path = root / "MMStar_pert_local.tsv"
    path.write_bytes(path.read_bytes()[:-40])


def _drop_column(root: Path) -> None:
    path = root / "MMStar_pert_local.tsv"
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    table.drop(columns=["image_path"]).to_csv(path, sep="\t", index=False)


def _set_cell(row: int, column: str, value: str) -> Callable[[Path], None]:
    """One cell of the TSV (read as strings) set to `value`; every other cell written back as it was."""

    def change(root: Path) -> None:
        path = root / "MMStar_pert_local.tsv"
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        table.loc[row, column] = value
        table.to_csv(path, sep="\t", index=False)

    return change


IMPORT_REFUSED = [
    Fault("an empty TSV", lambda r: (r / "MMStar_pert_local.tsv").write_bytes(b""),
          "MMStar_pert_local.tsv: empty file (no header line)"),
    Fault("an index ' 3' beside '3'", _set_cell(4, "index", " 3"),
          "MMStar_pert_local.tsv: data row 5 repeats index '3' of data row 4"),
    Fault("a NUL byte in an answer", _set_cell(0, "answer", "B\x00"), "MMStar_pert_local.tsv: line 2 holds a NUL byte"),
    Fault("a NUL byte in an index", _set_cell(3, "index", "3\x00"), "holds a NUL byte: a damaged file, not text"),
    Fault("a TSV cut mid-row", _cut_tsv, "MMStar_pert_local.tsv: the last line has no line end"),
    Fault("a TSV without image_path", _drop_column, "MMStar_pert_local.tsv: missing column(s) image_path"),
    Fault("an undecodable image", lambda r: (r / "images/MMStar_semantic_flux/5.jpg").write_text("garbage"),
          "MMStar_semantic_flux/5.jpg (MMStar_pert_local.tsv data row 6 (index 5)): unreadable image"),
    Fault("a truncated image", lambda r: (r / "images/MMStar_semantic_flux/6.jpg").write_bytes(
          (r / "images/MMStar_semantic_flux/6.jpg").read_bytes()[:200]), "6.jpg (MMStar_pert_local.tsv data row 7"),
    Fault("a damaged benchmark copy", lambda r: (r / "mmstar.parquet").write_text("garbage"),
          "mmstar.parquet: not a readable dataset copy"),
]  # fmt: skip


@pytest.mark.parametrize("fault", IMPORT_REFUSED, ids=lambda f: f.name)
def test_import_refuses_damaged_inputs(fault, release, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(release["root"], root)
    fault.change(root)
    code, err = run_cli(capsys, *_import_argv(root, tmp_path / "out"))
    assert_refused(code, err, fault.expected, [tmp_path / "out"])


def test_import_killed_then_rerun_equals_an_uninterrupted_import(release, tmp_path):
    seconds = timed(command(*_import_argv(release["root"], tmp_path / "whole")))
    kills, _ = killed_then_rerun(command(*_import_argv(release["root"], tmp_path / "killed")), seconds, "import")
    assert kills >= 1
    assert dataset_rows(tmp_path / "killed" / "data.parquet") == dataset_rows(tmp_path / "whole" / "data.parquet")
    no_temporary_files(tmp_path / "killed")


# ---------------------------------------------------------------- report


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory, fixture_sets) -> Path:
    out = tmp_path_factory.mktemp("lmms-eval-out")
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_at_sets(monkeypatch, fixture_sets)
        tasks = "mmstar_contam,mmstar_option_shuffle,realworldqa_original,realworldqa_perturbed"
        run = run_lmms_eval(["--model", "contam_test_memoriser", "--tasks", tasks], out)
    assert len(run.results.get("results", {})) == 4, run.output[-3000:]
    return out


def _edit_line(number: int, edit: Callable[[dict], object]) -> Callable[[Path], None]:
    """Line `number` of the samples file, parsed, changed in place by `edit`, written back."""

    def change(root: Path) -> None:
        (path,) = root.rglob("*_samples_mmstar_contam.jsonl")
        sample = json.loads(path.read_text().splitlines()[number - 1])
        edit(sample)
        _set_line(number, json.dumps(sample))(root)

    return change


def _answered_right(task: str, variant: str) -> Callable[[Path], None]:
    """Every `variant` sample of the task's samples file scored right: a well-formed file the run did not write
    (as a samples file of another model is)."""

    def change(root: Path) -> None:
        (path,) = root.rglob(f"*_samples_{task}.jsonl")
        samples = [json.loads(line) for line in path.read_text().splitlines()]
        for sample in samples:
            if sample["contam_ids"]["variant"] == variant:
                sample["contam_ids"]["correct"] = 1
        path.write_text("".join(json.dumps(sample) + "\n" for sample in samples))

    return change


def _set_line(number: int, text: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (path,) = root.rglob("*_samples_mmstar_contam.jsonl")
        lines = path.read_text().splitlines()
        lines[number - 1] = text
        path.write_text("\n".join(lines) + "\n")

    return change


def _cut_at_pair_boundary(root: Path) -> None:
    (path,) = root.rglob("*_samples_mmstar_contam.jsonl")
    path.write_text("\n".join(path.read_text().splitlines()[:-2]) + "\n")


def _replace_results(make: Callable[[dict], object]) -> Callable[[Path], None]:
    """results.json replaced by what `make` builds from it."""

    def change(root: Path) -> None:
        (path,) = root.rglob("*_results.json")
        path.write_text(json.dumps(make(json.loads(path.read_text()))))

    return change


def _edit_results(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    """results.json changed in place by `edit`."""
    return _replace_results(lambda results: (edit(results), results)[1])


SAMPLES = "_samples_mmstar_contam.jsonl"
REPORT_REFUSED = [
    Fault("a line that is a number", _set_line(3, "42"), f"{SAMPLES}:3: a sample is a JSON object, not a number"),
    Fault("a line that is a list", _set_line(3, "[1, 2]"), f"{SAMPLES}:3: a sample is a JSON object, not a list"),
    Fault("a line that is null", _set_line(3, "null"), f"{SAMPLES}:3: a sample is a JSON object, not null"),
    Fault("contam_ids without item_id", _edit_line(4, lambda s: s["contam_ids"].pop("item_id")),
          f"{SAMPLES}:4: contam_ids lacks item_id"),
    Fault('"correct": "yes"', _edit_line(5, lambda s: s["contam_ids"].update(correct="yes")),
          f"{SAMPLES}:5: contam_ids.correct is 'yes', expected 0 or 1"),
    Fault("samples cut at a pair boundary", _cut_at_pair_boundary, "22 samples, but its results file says 24"),
    Fault("results.json that is a list", _replace_results(lambda r: [r]),
          "_results.json: an lmms-eval results file is a JSON object, not a list"),
    Fault("configs that is not a mapping", _edit_results(lambda r: r.update(configs=["mmstar_contam"])),
          "_results.json: 'configs' is a list, expected an object"),
    Fault("a task's config that is a string", _edit_results(lambda r: r["configs"].update(mmstar_contam="x")),
          "_results.json: 'configs' of mmstar_contam is a string, expected an object"),
    Fault("results that is a list", _edit_results(lambda r: r.update(results=[])),
          "_results.json: 'results' is a list, expected an object"),
    Fault("samples of another run", _answered_right("mmstar_contam", "perturbed"),
          f"{SAMPLES}: its samples give acc_perturbed = 1, but "),
    Fault("detector samples of another run", _answered_right("mmstar_option_shuffle", "shuffled"),
          "_samples_mmstar_option_shuffle.jsonl: its samples give acc_shuffled = 1, but "),
    Fault("single-version samples of another run", _answered_right("realworldqa_perturbed", "perturbed"),
          "_samples_realworldqa_perturbed.jsonl: its samples give contam_acc = 1, but "),
    Fault("results that do not log the cross-checked figure",
          _edit_results(lambda r: r["results"]["realworldqa_original"].pop("contam_acc,none")),
          "no contam_acc for task realworldqa_original, so its samples cannot be checked against the run"),
    Fault("another task version",
          _edit_results(lambda r: r["configs"]["mmstar_contam"].update(metadata=[{"version": 2.0}])),
          "task mmstar_contam version 2.0"),
]  # fmt: skip


@pytest.mark.parametrize("fault", REPORT_REFUSED, ids=lambda f: f.name)
def test_report_refuses_damaged_inputs(fault, harness_run, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(harness_run, root)
    fault.change(root)
    outputs = [tmp_path / "r.json", tmp_path / "r.md"]
    code, err = run_cli(capsys, "report", root, "--json", outputs[0], "--markdown", outputs[1])
    assert_refused(code, err, fault.expected, outputs)


def test_report_joins_every_record_to_the_set_by_item_and_gold(harness_run, with_sets, tmp_path, capsys):
    """A record scored against another gold than the set gives its version (a run of another set, a samples file
    edited so its figures still agree) is refused; the run as it was reads, joined to the set."""
    assert run_cli(capsys, "report", harness_run, "--json", tmp_path / "ok.json")[0] == 0
    root = tmp_path / "in"
    shutil.copytree(harness_run, root)
    _edit_line(3, lambda s: s["contam_ids"].update(gold="Z"))(root)
    code, err = run_cli(capsys, "report", root, "--json", tmp_path / "r.json")
    assert_refused(code, err, f"{SAMPLES}: item ", [tmp_path / "r.json"])
    assert "was scored against gold 'Z', but the set that was scored" in err


def test_report_refuses_a_detector_run_of_another_set_beside_this_set_s_runs(harness_run, with_sets, tmp_path,
                                                                              capsys):  # fmt: skip
    """A detector run naming another set's manifest turned the join to the set off for every run of the
    benchmark (a verdict on another set's records, exit 0): each record naming another set is refused."""
    root = tmp_path / "in"
    shutil.copytree(harness_run, root)
    (path,) = root.rglob("*_samples_mmstar_option_shuffle.jsonl")
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    for sample in samples:
        sample["contam_ids"]["set_manifest"] = "f" * 64
    path.write_text("".join(json.dumps(sample) + "\n" for sample in samples))
    code, err = run_cli(capsys, "report", root, "--json", tmp_path / "r.json")
    assert_refused(code, err, "_samples_mmstar_option_shuffle.jsonl: scored the set whose manifest has SHA-256 "
                   "ffffffffffff", [tmp_path / "r.json"])  # fmt: skip


def test_report_writes_all_outputs_or_none_and_reads_one_run_under_two_spellings(harness_run, tmp_path, capsys,
                                                                                  monkeypatch):  # fmt: skip
    (tmp_path / "a-file").write_text("")
    outputs = [tmp_path / "r.json", tmp_path / "a-file" / "r.md"]
    code, err = run_cli(capsys, "report", harness_run, "--json", outputs[0], "--markdown", outputs[1])
    assert_refused(code, err, "a-file", outputs)
    monkeypatch.chdir(harness_run.parent)
    relative = Path(harness_run.name)
    code, err = run_cli(capsys, "report", relative, harness_run, f"./{relative}/../{relative}", "--json", outputs[0])
    assert code == 0, err
    assert len(json.loads(outputs[0].read_text())["results"]) == 2  # mmstar and realworldqa, each once


def test_report_escapes_what_the_user_wrote(harness_run, tmp_path, capsys):
    root = tmp_path / "in"
    shutil.copytree(harness_run, root)
    injected = "pretrained=x|y,<script>alert(1)</script>,[link](http://example.com)\n# heading"
    _edit_results(lambda r: r.update(model_name=None) or r["config"].update(model_args=injected))(root)
    code, err = run_cli(capsys, "report", root, "--markdown", tmp_path / "r.md")
    assert code == 0, err
    lines = (tmp_path / "r.md").read_text().splitlines()
    header = lines.index("## Leaderboard") + 2
    cells = lambda line: len(re.findall(r"(?<!\\)\|", line))  # noqa: E731 (unescaped column separators)
    assert lines[header + 2].startswith("| x\\|y |")  # the model's short name: its weights, `|` escaped
    assert cells(lines[header + 2]) == cells(lines[header])  # the injected `|` made no column
    models = lines.index("## Models") + 2  # and its full identity, escaped as well
    identity = next(line for line in lines[models + 2 :] if "contam\\_test\\_memoriser" in line)
    assert cells(identity) == cells(lines[models])
    text = "\n".join(lines)
    assert not re.search(r"(?<!\\)<script|(?<!\\)\]\(http|\n# heading", text)  # no live tag, link or heading
    assert "x\\|y" in text


def test_report_refuses_an_output_that_is_one_of_its_inputs(harness_run, tmp_path, capsys):
    """Defect 10: `--json` naming the run's own results file overwrote it."""
    root = tmp_path / "in"
    shutil.copytree(harness_run, root)
    (results,) = root.rglob("*_results.json")
    (samples,) = root.rglob("*_samples_mmstar_contam.jsonl")
    before = {path: path.read_bytes() for path in (results, samples)}
    for flag, target in (("--json", results), ("--markdown", samples), ("--html", results)):
        code, err = run_cli(capsys, "report", root, flag, target, "--json" if flag != "--json" else "--markdown",
                            tmp_path / "other")  # fmt: skip
        assert code == 2 and f"{flag} {target}: is a file of the runs the report reads" in err, err
    code, err = run_cli(capsys, "report", samples, "--json", results)  # a file named alone brings its run's
    assert code == 2 and f"--json {results}: is a file of the runs the report reads" in err, err
    code, err = run_cli(capsys, "report", root, "--markdown", tmp_path / "r", "--json", tmp_path / "x" / ".." / "r")
    assert code == 2 and "is --markdown's file too" in err, err
    assert {path: path.read_bytes() for path in before} == before and not (tmp_path / "other").exists()


def test_report_shows_a_model_named_as_a_heading_as_text(harness_run, tmp_path, capsys):
    """Defect 16: a model named `# Heading` became a heading of the Markdown report."""
    root = tmp_path / "in"
    shutil.copytree(harness_run, root)
    _edit_results(lambda r: r.update(model_name="# Heading"))(root)
    code, err = run_cli(capsys, "report", root, "--markdown", tmp_path / "r.md")
    assert code == 0, err
    text = (tmp_path / "r.md").read_text()
    assert "\\# Heading" in text and not re.search(r"(^|\n)(- )?# Heading", text)


def test_report_html_never_downloads_a_set_to_show_image_pairs(harness_run, tmp_path, capsys, monkeypatch):
    """Rendering a report started fetching the authors' release to show image pairs. A reader never downloads:
    with downloads on and no set here, no request is made and the page says where the set would come from."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with LoopbackGitHub(REPOSITORY, TAG) as github:
        for name, value in github.environment().items():
            monkeypatch.setenv(name, value)
        code, err = run_cli(capsys, "report", harness_run, "--html", tmp_path / "r.html")
    assert code == 0, err
    assert (
        not github.requests and "lmms-contam fetch mm-perturb --benchmark mmstar" in (tmp_path / "r.html").read_text()
    )


def test_report_killed_then_rerun_equals_an_uninterrupted_report(harness_run, tmp_path):
    outputs = lambda name: ["--json", tmp_path / f"{name}.json", "--markdown", tmp_path / f"{name}.md"]  # noqa: E731
    seconds = timed(command("report", harness_run, *outputs("whole")))
    killed_then_rerun(command("report", harness_run, *outputs("killed")), seconds, "report")
    assert (tmp_path / "killed.json").read_text() == (tmp_path / "whole.json").read_text()
    assert (tmp_path / "killed.md").read_text() == (tmp_path / "whole.md").read_text()
    no_temporary_files(tmp_path)


# ---------------------------------------------------------------- verify and datasets --check


def _judge_that_fails_until(fixed: dict):
    """A judge whose every reply is unusable until `fixed["now"]` is set, then the scripted verdicts."""
    verdicts = scripted()

    def script(body, number):
        return verdicts(body, number) if fixed["now"] else (200, completion("I cannot decide."), 0.0)

    return script


def test_a_failed_verify_leaves_the_earlier_subset_and_asks_again_once_the_judge_works(imported, tmp_path):
    """A rerun whose judge gave garbage for every item removed the earlier good subset; its unusable replies were
    stored and never asked again, so the rerun after the fix made no call and was still refused."""
    with LoopbackServer(scripted()) as good:
        assert verify(str(imported), "--config", str(recipe(tmp_path, good))).returncode == 0
    subset = [imported / "verified" / "data.parquet", imported / "verified" / "data.manifest.json"]
    before = [path.read_bytes() for path in subset]
    fixed = {"now": False}
    with LoopbackServer(_judge_that_fails_until(fixed)) as flaky:
        config = str(recipe(tmp_path, flaky))
        failed = verify(str(imported), "--config", config)
        assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
        assert "judge: every API call failed (12 item(s)); first error: UnusableReply" in failed.stderr
        assert [path.read_bytes() for path in subset] == before, "a failed run changed the earlier subset"
        fixed["now"] = True
        mended = verify(str(imported), "--config", config)
    assert mended.returncode == 0, mended.stderr
    assert len(flaky.requests) == 12 + 12, "the unusable replies were not asked again"
    assert f"kept {len(KEPT)} of 12 items" in mended.stdout


def test_verify_refuses_a_truncated_set_in_one_line(imported, tmp_path, capsys):
    data = imported / "data.parquet"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    code, err = run_cli(capsys, "verify", imported, "--config", recipe(tmp_path, LoopbackServer(scripted())))
    assert_refused(code, err, f"{data}: not a readable parquet file (truncated or damaged?)",
                   [imported / "verified"])  # fmt: skip


def _zero_rows(path: Path) -> None:
    datasets.Dataset.from_parquet(str(path)).select([]).to_parquet(str(path))


@pytest.mark.parametrize(("change", "expected"), [
    (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "not a readable parquet file (truncated"),
    (lambda p: p.write_bytes(b""), "not a readable parquet file (truncated or damaged?): Parquet file size is 0"),
    (_zero_rows, "holds no rows"),
], ids=["truncated", "0 bytes", "0 rows"])  # fmt: skip
def test_datasets_check_names_a_damaged_set_in_one_line(change, expected, fixture_sets, tmp_path, monkeypatch, capsys):
    copy = tmp_path / "mmstar.parquet"
    shutil.copy(fixture_sets["mmstar"], copy)
    change(copy)
    monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(copy))
    code, err = run_cli(capsys, "datasets", "--check", "mmstar")
    assert code == 1 and f"mmstar: {copy}: {expected}" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
