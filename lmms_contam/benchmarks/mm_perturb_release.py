"""`lmms-contam fetch mm-perturb`: the paper authors' released sets, downloaded, checked and imported.

The TSVs come from the authors' repository at a pinned commit and must match pinned SHA-256 values;
the images come from the repository's release v1.0.0, whose assets are listed through the GitHub
REST API, downloaded with resume, checked against the size (and digest, where GitHub gives one) the
listing states, and unpacked safely. The originals come from lmms-eval's hub ids or a local copy.
Then the importer (mm_perturb.py) writes each set where the tasks look for it. Base URLs are
configurable for mirrors and tests; a GITHUB_TOKEN is sent when set and never written anywhere.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from lmms_contam.atomic import atomic_path
from lmms_contam.benchmarks import loaders, mm_perturb
from lmms_contam.download import Downloaded, DownloadError, download, extract, get_json

REPOSITORY = "jadenpark0/mm-perturb"
COMMIT = "6a1d8d098b7528fa05847ab44a41dad4b67d3568"
TAG = "v1.0.0"
# sha256 of tsv/<name> at COMMIT, read from the repository itself.
TSVS = {
    "mmstar": ("MMStar_pert_local.tsv", "a8475dfc26b9f3fc218e2844e6f298b28a1d9e727e54a7f4186eafb346d61d47"),
    "realworldqa": ("RealWorldQA_pert_local.tsv", "2d814d7f6efa7507b32e06b9ab9e7194458e57ab9cf507af2d56912945446998"),
}
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
API_ENV, RAW_ENV = "LMMS_CONTAM_GITHUB_API", "LMMS_CONTAM_GITHUB_RAW"


def api_base() -> str:
    return os.environ.get(API_ENV, "https://api.github.com").rstrip("/")


def raw_base() -> str:
    return os.environ.get(RAW_ENV, "https://raw.githubusercontent.com").rstrip("/")


def _headers(accept: str | None = None) -> dict[str, str]:
    """The token goes to the URLs asked for; requests drops it on a redirect to another host."""
    headers = {"User-Agent": "lmms-contam", "X-GitHub-Api-Version": "2022-11-28"}
    if accept:
        headers["Accept"] = accept
    if os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['GITHUB_TOKEN']}"
    return headers


def fetch_tsv(benchmark: str, downloads: Path) -> Downloaded:
    name, sha256 = TSVS[benchmark]
    return download(f"{raw_base()}/{REPOSITORY}/{COMMIT}/tsv/{name}", downloads / name, headers=_headers(),
                    sha256=sha256)  # fmt: skip


def release_assets() -> list[dict]:
    """The release's archives as the API lists them (name, size, download URL, digest where given)."""
    url = f"{api_base()}/repos/{REPOSITORY}/releases/tags/{TAG}"
    listing = get_json(url, _headers("application/vnd.github+json"))
    assets = listing.get("assets") if isinstance(listing, dict) else None
    if not isinstance(assets, list):
        raise DownloadError(f"{url}: not a release listing (no 'assets')")
    archives = [a for a in assets if isinstance(a, dict) and str(a.get("name", "")).endswith(ARCHIVE_SUFFIXES)]
    if not archives:
        names = ", ".join(str(a.get("name")) for a in assets if isinstance(a, dict)) or "none"
        raise DownloadError(f"{url}: release {TAG} has no image archive (assets: {names})")
    return archives


def fetch_images(downloads: Path) -> tuple[list[Downloaded], Path]:
    """Every archive of the release, downloaded and unpacked under `downloads/images`."""
    fetched, unpacked = [], downloads / "images"
    for asset in release_assets():
        digest = str(asset.get("digest") or "")
        archive = download(asset["browser_download_url"], downloads / PurePosixPath(asset["name"]).name,
                           headers=_headers("application/octet-stream"), size=asset.get("size"),
                           sha256=digest.removeprefix("sha256:") if digest.startswith("sha256:") else None)  # fmt: skip
        fetched.append(archive)
        target = unpacked / archive.path.name.split(".")[0]
        marker = target.with_name(f".{target.name}.sha256")
        if not (target.is_dir() and marker.is_file() and marker.read_text() == archive.sha256):
            extract(archive.path, target)
            with atomic_path(marker) as tmp:
                tmp.write_text(archive.sha256)
    return fetched, unpacked


def image_root(unpacked: Path, tsv: Path) -> Path:
    """The folder under which the TSV's image folders (e.g. MMStar_semantic_flux) lie, wherever an archive
    put them."""
    table = mm_perturb.read_tsv(tsv)
    folder, _ = Counter(PurePosixPath(p).parent.name for p in table["image_path"]).most_common(1)[0]
    found = sorted(p for p in unpacked.rglob(folder) if p.is_dir())
    if not found:
        raise DownloadError(f"{unpacked}: the release's archives hold no folder {folder!r}, which "
                            f"{tsv.name} points into")  # fmt: skip
    return found[0].parent


def fetch_release(benchmarks: Iterable[str], sets: dict[str, Path], downloads: Path,
                  originals: dict[str, str | None]) -> dict[str, mm_perturb.ImportSummary]:  # fmt: skip
    """Download, check and import each benchmark's set into `sets[benchmark]`; a `fetch.json` beside each
    set records what was downloaded (URLs, sizes, SHA-256) and from which commit and release."""
    benchmarks = list(benchmarks)
    tsvs = {benchmark: fetch_tsv(benchmark, downloads) for benchmark in benchmarks}
    archives, unpacked = fetch_images(downloads)
    summaries = {}
    for benchmark in benchmarks:
        items = loaders.items(benchmark, loaders.load_rows(benchmark, originals.get(benchmark)))
        images = image_root(unpacked, tsvs[benchmark].path)
        summaries[benchmark] = mm_perturb.import_release(benchmark, tsvs[benchmark].path, images, items,
                                                         sets[benchmark])  # fmt: skip
        record = {"repository": REPOSITORY, "commit": COMMIT, "release": TAG, "tsv": tsvs[benchmark].as_dict(),
                  "archives": [a.as_dict() for a in archives], "originals": originals.get(benchmark) or "hub",
                  "verified": False}  # fmt: skip
        with atomic_path(Path(sets[benchmark]) / "fetch.json") as tmp:
            tmp.write_text(json.dumps(record, indent=2) + "\n")
    return summaries
