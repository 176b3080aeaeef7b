"""`lmms-contam fetch mm-perturb` and the tasks' own provisioning, against a loopback GitHub that serves
the authors' real TSVs (their pinned SHA-256 values must match) and a release built here in the
authors' folder layout, with dropped connections, a corrupted byte, 403 and 404 injected."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import datasets
import numpy as np
import pytest
from helpers.fixtures import RELEASE, real_photos
from helpers.harness import metric, run_lmms_eval
from helpers.loopback_github import LoopbackGitHub

from lmms_contam.benchmarks.mm_perturb import read_tsv, row_options
from lmms_contam.benchmarks.mm_perturb_release import COMMIT, REPOSITORY, TAG, TSVS

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
    code = "from lmms_contam.set_locations import resolve; print(resolve('mmstar').value)"
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


# ---------------------------------------------------------------- hostile releases and networks


def _split_archive(archive: bytes) -> tuple[bytes, bytes]:
    """The release's images in two archives, every other image in each, in the same folder layout."""
    parts = (io.BytesIO(), io.BytesIO())
    with zipfile.ZipFile(io.BytesIO(archive)) as whole:
        images = [name for name in whole.namelist() if name.endswith(".jpg")]
        with zipfile.ZipFile(parts[0], "w") as first, zipfile.ZipFile(parts[1], "w") as second:
            for number, name in enumerate(images):
                (first, second)[number % 2].writestr(name, whole.read(name))
    return parts[0].getvalue(), parts[1].getvalue()


def _imported(tmp_path: Path) -> list[dict]:
    folder = tmp_path / "home" / "datasets" / "mmstar"
    return datasets.load_dataset("parquet", data_files=str(folder / "data.parquet"), split="train").to_list()


def test_a_release_in_several_archives_loses_no_image(release, tmp_path):
    """MMStar.part1.zip and MMStar.part2.zip unpacked into one folder named up to the first dot overwrote each
    other: exit 0 with half the rows."""
    with serve(release) as github:
        github.assets = dict(zip(("MMStar.part1.zip", "MMStar.part2.zip"), _split_archive(release["archive"]),
                                 strict=True))  # fmt: skip
        done = fetch(environment(github, tmp_path / "home", release))
    assert done.returncode == 0, done.stderr
    assert len(_imported(tmp_path)) == release["kept"]
    unpacked = tmp_path / "home" / "downloads" / "mm-perturb" / "images"
    assert sorted(p.name for p in unpacked.iterdir() if p.is_dir()) == ["MMStar.part1.zip", "MMStar.part2.zip"]


def test_a_cached_archive_of_the_wrong_size_is_fetched_again(release, tmp_path):
    """A listing without digests: the cached file was reused whatever its size (exit 0, half the rows)."""
    downloads = tmp_path / "home" / "downloads" / "mm-perturb"
    downloads.mkdir(parents=True)
    (downloads / ASSET).write_bytes(_split_archive(release["archive"])[0])  # a whole zip, but not the listed one
    with serve(release) as github:
        github.digests = False
        done = fetch(environment(github, tmp_path / "home", release))
    assert done.returncode == 0, done.stderr
    assert github.count("/download/") == 1 and len(_imported(tmp_path)) == release["kept"]
    record = json.loads((tmp_path / "home" / "datasets" / "mmstar" / "fetch.json").read_text())
    assert record["archives"][0]["checked"] == ["size"]  # no digest listed: the size is what was checked


def _tar_with(*members: tarfile.TarInfo) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        photo = real_photos()[0]
        info = tarfile.TarInfo("images/MMStar_semantic_flux/0.jpg")
        info.size = len(photo)
        archive.addfile(info, io.BytesIO(photo))
        for member in members:
            archive.addfile(member)
    return data.getvalue()


def _tar_member(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _zip_link_not_utf8() -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("images/MMStar_semantic_flux/0.jpg", real_photos()[0])
        link = zipfile.ZipInfo("images/link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, b"\xff\xfe\xfd")
    return data.getvalue()


HOSTILE_ARCHIVES = [  # (asset name, bytes, what stderr names)
    ("images.tar", _tar_with(_tar_member("images/pipe", tarfile.FIFOTYPE)),
     "member 'images/pipe' has a special file type (a FIFO)"),
    ("images.tar", _tar_with(_tar_member("images/disk", tarfile.BLKTYPE)),
     "member 'images/disk' has a special file type (a device)"),
    # Each link stays inside by its own path; followed one after the other they lead out of the folder.
    ("images.tar", _tar_with(_tar_member("d", tarfile.DIRTYPE), _tar_member("d/up", tarfile.SYMTYPE, ".."),
                             _tar_member("d/up/out", tarfile.SYMTYPE, "..")), "images.tar: unpacking failed"),
    ("images.zip", _zip_link_not_utf8(), "member 'images/link' has a link target that is not UTF-8 text"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "archive", "expected"), HOSTILE_ARCHIVES,
                         ids=["a FIFO", "a device", "a symlink chain out", "a zip link that is not text"])  # fmt: skip
def test_an_archive_with_a_member_that_may_not_be_unpacked_is_refused_in_one_line(name, archive, expected, release,
                                                                                  tmp_path):  # fmt: skip
    with serve(release) as github:
        github.assets = {name: archive}
        done = fetch(environment(github, tmp_path / "home", release))
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    unpacked = tmp_path / "home" / "downloads" / "mm-perturb" / "images"
    assert not list(unpacked.glob(".*partial")) and not list(unpacked.glob(name)), "an unpacking was left behind"
    assert not (tmp_path / "home" / "datasets").exists()


def test_an_asset_without_a_download_url_is_refused_in_one_line(release, tmp_path):
    with serve(release) as github:
        github.edit_listing = lambda assets: assets[0].pop("browser_download_url")
        done = fetch(environment(github, tmp_path / "home", release))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"asset '{ASSET}' has no browser_download_url" in done.stderr and github.listing_path in done.stderr


def test_the_token_goes_only_to_the_configured_hosts(release, tmp_path):
    """A listing may name any host for its assets: the token is not sent there (the download itself is checked
    against the listed size and digest as always)."""
    with serve(release) as github, serve(release) as elsewhere:
        github.edit_listing = lambda assets: assets[0].update(browser_download_url=f"{elsewhere.base}/download/{ASSET}")
        done = fetch(environment(github, tmp_path / "home", release))
    assert done.returncode == 0, done.stderr
    assert elsewhere.count("/download/") == 1 and github.count("/download/") == 0
    assert not any("authorization" in headers for _, headers in elsewhere.requests)
    assert all(headers.get("authorization") == f"Bearer {TOKEN}" for _, headers in github.requests)


def test_a_download_that_drips_is_given_up_and_resumed(release, tmp_path):
    """One byte a second never trips a read timeout: a stall deadline gives it up, and a rerun resumes."""
    with serve(release) as github:
        github.faults[f"/download/{ASSET}"] = ["drop", "drip"]  # half the file, then a trickle
        env = environment(github, tmp_path / "home", release, LMMS_CONTAM_DOWNLOAD_STALL_S="3")
        started = time.monotonic()
        stalled = fetch(env)
        seconds = time.monotonic() - started
        part = tmp_path / "home" / "downloads" / "mm-perturb" / f"{ASSET}.part"
        kept = part.stat().st_size
        resumed = fetch(env)
    assert stalled.returncode == 2 and "the download stalled" in stalled.stderr, stalled.stderr
    assert f"rerun to resume from byte {kept}" in stalled.stderr and kept >= len(release["archive"]) // 2 - (1 << 20)
    assert seconds < 60, f"a stalled download took {seconds:.0f} s to give up"
    assert resumed.returncode == 0, resumed.stderr
    ranges = [headers.get("range") for path, headers in github.requests if path == f"/download/{ASSET}"]
    assert ranges[-1] == f"bytes={kept}-"


@pytest.mark.parametrize("api", ["http://127.0.0.1:9", "http://no-such-host.invalid"],
                         ids=["a refused connection", "a name that does not resolve"])  # fmt: skip
def test_an_offline_machine_fails_fast_with_one_line(api, release, tmp_path):
    env = {**environment(LoopbackGitHub(REPOSITORY, TAG), tmp_path / "home", release), "LMMS_CONTAM_GITHUB_API": api,
           "LMMS_CONTAM_GITHUB_RAW": api}  # fmt: skip
    started = time.monotonic()
    done = fetch(env)
    assert time.monotonic() - started < 30
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "this machine seems offline" in done.stderr and "LMMS_CONTAM_AUTO_FETCH=0" in done.stderr


def test_showing_where_the_sets_are_never_downloads(release, tmp_path):
    with serve(release) as github:
        env = environment(github, tmp_path / "home", release)
        env.pop("HF_HUB_OFFLINE", None)  # downloads allowed: the tasks would fetch on first use
        shown = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "datasets", "mmstar", "realworldqa"],
                               capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
        checked = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "datasets", "--check", "mmstar"],
                                 capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert not github.requests and not (tmp_path / "home" / "datasets").exists()
    assert shown.returncode == 0, shown.stderr
    for benchmark in ("mmstar", "realworldqa"):
        folder = tmp_path / "home" / "datasets" / benchmark
        shown_line = f"{benchmark}: not here yet: the tasks fetch the paper authors' release (github.com/{REPOSITORY}, "
        assert f"{shown_line}release {TAG}) into {folder} on first use" in shown.stdout
    assert checked.returncode == 1 and "lmms-contam fetch mm-perturb --benchmark mmstar" in checked.stderr
