"""`lmms-contam fetch mm-perturb`: the paper authors' released sets, downloaded, checked and imported.

The TSVs come from the authors' repository at a pinned commit and must match pinned SHA-256 values;
the images come from the repository's release v1.0.0, whose assets are listed through the GitHub
REST API, downloaded with resume, checked against the size (and digest, where GitHub gives one) the
listing states, and unpacked safely. The originals come from lmms-eval's hub ids or a local copy.
Then the importer (mm_perturb.py) writes each set where the tasks look for it. Base URLs are
configurable for mirrors and tests; a GITHUB_TOKEN is sent when set, only to those hosts, and never
written anywhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from lmms_contam.atomic import atomic_path
from lmms_contam.benchmarks import loaders, mm_perturb
from lmms_contam.download import Downloaded, DownloadError, download, extract, get_json

REPOSITORY = "jadenpark0/mm-perturb"
COMMIT = "6a1d8d098b7528fa05847ab44a41dad4b67d3568"
TAG = "v1.0.0"
RELEASE_PAGE = f"github.com/{REPOSITORY}, release {TAG}"
# sha256 of tsv/<name> at COMMIT, read from the repository itself.
TSVS = {
    "mmstar": ("MMStar_pert_local.tsv", "a8475dfc26b9f3fc218e2844e6f298b28a1d9e727e54a7f4186eafb346d61d47"),
    "realworldqa": ("RealWorldQA_pert_local.tsv", "2d814d7f6efa7507b32e06b9ab9e7194458e57ab9cf507af2d56912945446998"),
}
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
API_ENV, RAW_ENV, DOWNLOAD_ENV = "LMMS_CONTAM_GITHUB_API", "LMMS_CONTAM_GITHUB_RAW", "LMMS_CONTAM_GITHUB_DOWNLOAD"


def api_base() -> str:
    return os.environ.get(API_ENV, "https://api.github.com").rstrip("/")


def raw_base() -> str:
    return os.environ.get(RAW_ENV, "https://raw.githubusercontent.com").rstrip("/")


def download_base() -> str:
    """Where release assets are downloaded from (GitHub's browser_download_url host, or a mirror's)."""
    return os.environ.get(DOWNLOAD_ENV, "https://github.com").rstrip("/")


def _token_hosts() -> set[str]:
    return {urlsplit(base).netloc.lower() for base in (api_base(), raw_base(), download_base())}


def _headers(url: str, accept: str | None = None) -> dict[str, str]:
    """The token goes only to the configured GitHub API, raw and download hosts, never to another host a
    listing names; requests drops it on a redirect to another host."""
    headers = {"User-Agent": "lmms-contam", "X-GitHub-Api-Version": "2022-11-28"}
    if accept:
        headers["Accept"] = accept
    if os.environ.get("GITHUB_TOKEN") and urlsplit(url).netloc.lower() in _token_hosts():
        headers["Authorization"] = f"Bearer {os.environ['GITHUB_TOKEN']}"
    return headers


def fetch_tsv(benchmark: str, downloads: Path) -> Downloaded:
    name, sha256 = TSVS[benchmark]
    url = f"{raw_base()}/{REPOSITORY}/{COMMIT}/tsv/{name}"
    return download(url, downloads / name, headers=_headers(url), sha256=sha256)


@dataclass(frozen=True)
class Asset:
    """One archive of the release, as its listing describes it."""

    name: str
    url: str
    size: int
    sha256: str | None  # where the listing gives a digest


def _asset(entry: dict, listing: str) -> Asset:
    name, url, size = entry.get("name"), entry.get("browser_download_url"), entry.get("size")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise DownloadError(f"{listing}: asset {name!r} has no browser_download_url")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise DownloadError(f"{listing}: asset {name!r} has no size (got {size!r})")
    digest = str(entry.get("digest") or "")
    return Asset(
        name=PurePosixPath(str(name)).name,
        url=url,
        size=size,
        sha256=digest.removeprefix("sha256:") if digest.startswith("sha256:") else None,
    )


def release_assets() -> list[Asset]:
    """The release's archives as the API lists them (name, download URL, size, digest where given)."""
    url = f"{api_base()}/repos/{REPOSITORY}/releases/tags/{TAG}"
    listing = get_json(url, _headers(url, "application/vnd.github+json"))
    assets = listing.get("assets") if isinstance(listing, dict) else None
    if not isinstance(assets, list):
        raise DownloadError(f"{url}: not a release listing (no 'assets')")
    archives = [
        _asset(a, url) for a in assets if isinstance(a, dict) and str(a.get("name", "")).endswith(ARCHIVE_SUFFIXES)
    ]
    if not archives:
        names = ", ".join(str(a.get("name")) for a in assets if isinstance(a, dict)) or "none"
        raise DownloadError(f"{url}: release {TAG} has no image archive (assets: {names})")
    if len({a.name for a in archives}) < len(archives):
        raise DownloadError(f"{url}: release {TAG} lists an archive name twice")
    return archives


def fetch_images(downloads: Path) -> tuple[list[Downloaded], list[Path]]:
    """Every archive of the release, downloaded and unpacked into a folder of its own full name under
    `downloads/images` (MMStar.part1.zip and MMStar.part2.zip never share one)."""
    fetched, unpacked = [], []
    for asset in release_assets():
        archive = download(
            asset.url,
            downloads / asset.name,
            headers=_headers(asset.url, "application/octet-stream"),
            size=asset.size,
            sha256=asset.sha256,
        )
        fetched.append(archive)
        target = downloads / "images" / asset.name
        marker = target.with_name(f".{target.name}.sha256")
        if not (target.is_dir() and marker.is_file() and marker.read_text() == archive.sha256):
            extract(archive.path, target)
            with atomic_path(marker) as tmp:
                tmp.write_text(archive.sha256)
        unpacked.append(target)
    return fetched, unpacked


def image_roots(unpacked: list[Path], tsv: Path) -> list[Path]:
    """Every folder under which the TSV's image folders (e.g. MMStar_semantic_flux) lie, in any archive: the
    importer looks for each row's image in all of them."""
    table = mm_perturb.read_tsv(tsv)
    folders = {PurePosixPath(p).parent.name for p in table["image_path"]} - {""}
    found = sorted({p.parent for root in unpacked for folder in folders for p in root.rglob(folder) if p.is_dir()})
    if not found:
        listed = ", ".join(sorted(folders)) or "none"
        raise DownloadError(
            f"{', '.join(map(str, unpacked))}: the release's archives hold none of the folders "
            f"{tsv.name} points into ({listed})"
        )
    return found


def fetch_release(
    benchmarks: Iterable[str], sets: dict[str, Path], downloads: Path, originals: dict[str, str | None]
) -> dict[str, mm_perturb.ImportSummary]:
    """Download, check and import each benchmark's set into `sets[benchmark]`; a `fetch.json` beside each
    set records what was downloaded (URLs, sizes, SHA-256) and from which commit and release."""
    benchmarks = list(benchmarks)
    tsvs = {benchmark: fetch_tsv(benchmark, downloads) for benchmark in benchmarks}
    archives, unpacked = fetch_images(downloads)
    summaries = {}
    for benchmark in benchmarks:
        items = loaders.items(benchmark, loaders.load_rows(benchmark, originals.get(benchmark)))
        images = image_roots(unpacked, tsvs[benchmark].path)
        summaries[benchmark] = mm_perturb.import_release(
            benchmark, tsvs[benchmark].path, images, items, sets[benchmark]
        )
        record = {
            "repository": REPOSITORY,
            "commit": COMMIT,
            "release": TAG,
            "tsv": tsvs[benchmark].as_dict(),
            "archives": [a.as_dict() for a in archives],
            "originals": originals.get(benchmark) or "hub",
            "verified": False,
        }
        with atomic_path(Path(sets[benchmark]) / "fetch.json") as tmp:
            tmp.write_text(json.dumps(record, indent=2) + "\n")
    return summaries
