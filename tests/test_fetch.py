"""`lmms-contam fetch mm-perturb` and the tasks' own provisioning, against a loopback GitHub that serves
the authors' real TSVs (their pinned SHA-256 values must match) and a release built here in the
authors' folder layout, with dropped connections, a corrupted byte, 403 and 404 injected."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import datasets
import numpy as np
import pytest
from conftest import metric, run_lmms_eval
from fixtures import RELEASE, real_photos
from loopback_github import LoopbackGitHub

from lmms_contam.benchmarks.mm_perturb import read_tsv, row_options
from lmms_contam.benchmarks.mm_perturb_release import COMMIT, REPOSITORY, TAG, TSVS

pytestmark = pytest.mark.slow
TOKEN = "ghp_loopbackTokenNeverStored0123456789"
ASSET = "perturbed_images.zip"


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict:
    """A local MMStar copy holding the originals of the release's first usable rows, and the release's
    image archive for them (images/MMStar_semantic_flux/<index>.jpg, as the TSV's paths end)."""
    assert RELEASE.is_dir(), f"the release TSVs are expected in shared/ beside the checkout: {RELEASE}"
    root = tmp_path_factory.mktemp("release")
    table = read_tsv(RELEASE / TSVS["mmstar"][0])
    usable = [row for _, row in table.iterrows() if row["answer"] in "ABCD" and len(row["answer"]) == 1
              and Path(row["image_path"]).parent.name == "MMStar_semantic_flux"][:10]  # fmt: skip
    photos = real_photos()
    originals, archive = [], io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for number, row in enumerate(usable):
            options = row_options(row)
            listed = ", ".join(f"{chr(65 + i)}: {text}" for i, text in enumerate(options))
            other = next(letter for letter in "ABCD"[: len(options)] if letter != row["answer"])
            originals.append({"index": int(row["index"]), "question": f"{row['question']}\nOptions: {listed}",
                              "answer": other, "category": row["category"], "l2_category": row["l2_category"],
                              "image": {"bytes": photos[number]}})  # fmt: skip
            zipped.writestr(f"images/MMStar_semantic_flux/{row['index']}.jpg", photos[-1 - number])
        # Incompressible filler, so that a connection dropped halfway has delivered whole 1 MB blocks.
        zipped.writestr("images/filler.bin", np.random.default_rng(0).bytes(5 << 20), zipfile.ZIP_STORED)
    copy = root / "mmstar.parquet"
    datasets.Dataset.from_list(originals).cast_column("image", datasets.Image()).to_parquet(str(copy))
    return {"originals": copy, "archive": archive.getvalue(), "kept": len(usable)}


def serve(release: dict) -> LoopbackGitHub:
    github = LoopbackGitHub(REPOSITORY, TAG)
    for name, _ in TSVS.values():
        github.raw[f"{REPOSITORY}/{COMMIT}/tsv/{name}"] = (RELEASE / name).read_bytes()
    github.assets[ASSET] = release["archive"]
    return github


def environment(github: LoopbackGitHub, home: Path, release: dict, **extra: str) -> dict[str, str]:
    return {**os.environ, **github.environment(), "LMMS_CONTAM_HOME": str(home), "GITHUB_TOKEN": TOKEN,
            "LMMS_CONTAM_ORIGINALS_MMSTAR": str(release["originals"]), **extra}  # fmt: skip


def fetch(env: dict, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lmms_contam.cli", "fetch", "mm-perturb", "--benchmark", "mmstar", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


def test_fetch_checks_imports_and_records_the_release(release, tmp_path):
    with serve(release) as github:
        env = environment(github, tmp_path / "home", release)
        done = fetch(env)
        assert done.returncode == 0, done.stderr
        again = fetch(env)  # every file is there and right: nothing is downloaded again
    assert again.returncode == 0, again.stderr
    assert github.count("/download/") == 1 and github.count("/raw/") == 1
    assert all(headers.get("authorization") == f"Bearer {TOKEN}" for _, headers in github.requests)
    folder = tmp_path / "home" / "datasets" / "mmstar"
    assert f"mmstar: {release['kept']} of 1500 released rows imported into {folder}" in done.stdout
    kept = datasets.load_dataset("parquet", data_files=str(folder / "data.parquet"), split="train")
    assert len(kept) == release["kept"] and all(r["new_answer"] != r["original_answer"] for r in kept)
    record = json.loads((folder / "fetch.json").read_text())
    assert (record["commit"], record["release"], record["verified"]) == (COMMIT, TAG, False)
    assert record["tsv"]["sha256"] == TSVS["mmstar"][1]
    assert record["archives"][0]["size"] == len(release["archive"])
    written = "".join(p.read_text() for p in folder.glob("*.json")) + done.stdout + done.stderr
    assert TOKEN not in written


@pytest.mark.parametrize(
    ("path", "faults", "outcome"),
    [
        (f"/download/{ASSET}", ["drop", "drop"], "resumed"),
        (f"/download/{ASSET}", ["corrupt"], "does not match its checksum"),
        (f"/raw/{REPOSITORY}/{COMMIT}/tsv/{TSVS['mmstar'][0]}", ["corrupt"], "does not match its checksum"),
        (f"/api/repos/{REPOSITORY}/releases/tags/{TAG}", [403], "rate limit is used up (403); set GITHUB_TOKEN"),
        (f"/raw/{REPOSITORY}/{COMMIT}/tsv/{TSVS['mmstar'][0]}", [404], "not found (404)"),
    ],
    ids=["dropped connections", "corrupted asset", "corrupted TSV", "rate limit", "not found"],
)
def test_network_faults(path, faults, outcome, release, tmp_path):
    with serve(release) as github:
        github.faults[path] = list(faults)
        done = fetch(environment(github, tmp_path / "home", release))
    folder = tmp_path / "home" / "datasets" / "mmstar"
    downloads = tmp_path / "home" / "downloads" / "mm-perturb"
    if outcome == "resumed":
        assert done.returncode == 0, done.stderr
        ranges = [headers.get("range") for p, headers in github.requests if p == path]
        assert ranges[0] is None and all(r and r != "bytes=0-" for r in ranges[1:]) and len(ranges) == 3
        assert (folder / "data.parquet").exists()
        return
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert outcome in done.stderr and github.base in done.stderr  # the URL is named
    assert not folder.exists() and not list(downloads.glob("*.part"))


def _two_megabyte_disk() -> None:
    """A disk that fills at 2 MB, as a file size limit (writes past it fail with EFBIG)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))


def test_a_full_disk_stops_with_a_clear_error_and_no_set(release, tmp_path):
    command = [sys.executable, "-m", "lmms_contam.cli", "fetch", "mm-perturb", "--benchmark", "mmstar"]
    with serve(release) as github:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, preexec_fn=_two_megabyte_disk,
                              env=environment(github, tmp_path / "home", release))  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{ASSET}.part: no room to write" in done.stderr and "rerun to resume" in done.stderr
    downloads = tmp_path / "home" / "downloads" / "mm-perturb"
    assert not (downloads / ASSET).exists() and not (tmp_path / "home" / "datasets").exists()


def test_an_archive_member_that_leaves_the_folder_is_refused(release, tmp_path):
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as zipped:
        zipped.writestr("images/MMStar_semantic_flux/0.jpg", real_photos()[0])
        zipped.writestr("../../outside.txt", "escaped")
    with serve(release) as github:
        github.assets[ASSET] = evil.getvalue()
        done = fetch(environment(github, tmp_path / "home", release))
    assert done.returncode == 2 and "member '../../outside.txt' has a '..' step out of the folder" in done.stderr
    assert not list(tmp_path.rglob("outside.txt")) and not (tmp_path / "home" / "datasets").exists()


def test_two_provisioners_at_once_download_once(release, tmp_path):
    code = "from lmms_contam.harness.datasets import resolve; print(resolve('mmstar').value)"
    with serve(release) as github:
        env = environment(github, tmp_path / "home", release)
        env.pop("HF_HUB_OFFLINE", None)
        procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
        outputs = [proc.communicate(timeout=600) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    assert {out.strip() for out, _ in outputs} == {str(tmp_path / "home" / "datasets" / "mmstar")}
    assert github.count("/download/") == 1 and github.count("/raw/") == 1


def test_lmms_eval_provisions_the_set_itself_and_scores_it(release, tmp_path, monkeypatch):
    """No set configured anywhere: the task fetches the release (through the loopback) and scores it; with
    downloads off, the message names the fetch command."""
    with serve(release) as github:
        for name, value in environment(github, tmp_path / "home", release).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("LMMS_CONTAM_AUTO_FETCH", "0")
        off = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "datasets", "mmstar"], capture_output=True,
                             text=True, timeout=300)  # fmt: skip
        assert off.returncode == 1 and "lmms-contam fetch mm-perturb --benchmark mmstar" in off.stderr
        assert not github.requests
        monkeypatch.delenv("LMMS_CONTAM_AUTO_FETCH")
        monkeypatch.delenv("HF_HUB_OFFLINE")  # downloads allowed, to the loopback only
        run = run_lmms_eval(["--model", "contam_test_memoriser", "--tasks", "mmstar_contam"], tmp_path / "out")
    assert metric(run, "mmstar_contam", "n_pairs") == release["kept"], run.output[-3000:]
    assert metric(run, "mmstar_contam", "delta") == -1.0
    assert "fetching the paper authors' release" in run.output
    assert github.count("/download/") == 1
