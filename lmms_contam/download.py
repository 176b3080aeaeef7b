"""Files from the web that survive the web: resumed with HTTP Range, retried with backoff, checked
against their size and SHA-256, and never left looking complete when they are not (a download
grows in `<name>.part` and is renamed only once it is whole and checked). Archives are unpacked
only when no member could land outside the folder.
"""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import shutil
import stat
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import requests
from tqdm.auto import tqdm

CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """A download or archive that cannot be used; the message names the URL or file and what to do."""


class _Retryable(Exception):
    pass


@dataclass(frozen=True)
class Downloaded:
    url: str
    path: Path
    size: int
    sha256: str

    def as_dict(self) -> dict:
        return {"url": self.url, "file": self.path.name, "size": self.size, "sha256": self.sha256}


def file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            sha.update(block)
    return sha.hexdigest()


def _refusal(response: requests.Response, url: str) -> DownloadError | None:
    """A clear error for the answers that retrying cannot mend."""
    status = response.status_code
    if status == 404:
        return DownloadError(f"{url}: not found (404); check the repository, commit or release tag, or the mirror "
                             "in LMMS_CONTAM_GITHUB_API / LMMS_CONTAM_GITHUB_RAW")  # fmt: skip
    if status in (401, 403) and response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset")
        when = time.strftime("%H:%M UTC", time.gmtime(int(reset))) if reset and reset.isdigit() else "later"
        return DownloadError(f"{url}: GitHub's rate limit is used up ({status}); set GITHUB_TOKEN to a token of "
                             f"yours, or retry after {when}")  # fmt: skip
    if status in (401, 403):
        return DownloadError(f"{url}: access refused ({status}); if GITHUB_TOKEN is set, check that it is valid")
    if 400 <= status < 500 and status not in (408, 429):
        return DownloadError(f"{url}: the server refused the request ({status})")
    return None


def get_json(url: str, headers: dict[str, str], retries: int = 4, backoff: float = 1.0) -> object:
    """A JSON document, retried on connection errors and 5xx/429 answers."""
    for attempt in range(retries + 1):
        try:
            response = requests.get(url, headers=headers, timeout=30)
            refused = _refusal(response, url)
            if refused:
                raise refused
            if response.status_code >= 400:
                raise _Retryable(f"HTTP {response.status_code}")
            return response.json()
        except (requests.ConnectionError, requests.Timeout, _Retryable, ValueError) as exc:
            if attempt == retries:
                raise DownloadError(f"{url}: failed after {retries + 1} tries ({exc})") from exc
            time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def _expected_total(response: requests.Response, have: int) -> int | None:
    if response.status_code == 206:
        total = response.headers.get("content-range", "").rpartition("/")[2]
        return int(total) if total.isdigit() else None
    length = response.headers.get("content-length")
    return int(length) if length and length.isdigit() else None


def _fetch_once(url: str, part: Path, headers: dict[str, str]) -> None:
    """Append the rest of `url` to `part` (or start it again if the server ignores the range)."""
    have = part.stat().st_size if part.exists() else 0
    ranged = {**headers, "Range": f"bytes={have}-"} if have else headers
    with requests.get(url, headers=ranged, stream=True, timeout=(15, 60)) as response:
        if response.status_code == 416 and have:
            return  # nothing left to fetch: the checks below decide whether what we have is right
        refused = _refusal(response, url)
        if refused:
            raise refused
        if response.status_code >= 400:
            raise _Retryable(f"HTTP {response.status_code}")
        if response.status_code != 206:
            have = 0
        total = _expected_total(response, have)
        with open(part, "ab" if have else "wb") as handle, tqdm(
            total=total, initial=have, unit="B", unit_scale=True, desc=part.name.removesuffix(".part"),
            disable=total is not None and total < (8 << 20),
        ) as progress:  # fmt: skip
            for block in response.iter_content(CHUNK):
                handle.write(block)
                progress.update(len(block))
        if total is not None and part.stat().st_size < total:
            raise _Retryable(f"connection closed at byte {part.stat().st_size} of {total}")


def download(url: str, target: Path, *, headers: dict[str, str] | None = None, sha256: str | None = None,
             size: int | None = None, retries: int = 5, backoff: float = 1.0) -> Downloaded:  # fmt: skip
    """`url` into `target`, resumed where an earlier try stopped, then checked against `size` and `sha256`
    where given. A target already there and right is not fetched again."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and (sha256 is None or file_sha256(target) == sha256):
        return Downloaded(url, target, target.stat().st_size, file_sha256(target))
    part = target.with_name(target.name + ".part")
    for attempt in range(retries + 1):
        try:
            _fetch_once(url, part, headers or {})
            break
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                _Retryable) as exc:  # fmt: skip
            if attempt == retries:
                raise DownloadError(f"{url}: failed after {retries + 1} tries ({exc}); rerun to resume from byte "
                                    f"{part.stat().st_size if part.exists() else 0}") from exc  # fmt: skip
            time.sleep(backoff * 2**attempt)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # a full disk, a quota, a file size limit
                raise DownloadError(f"{part}: no room to write ({exc}); free space and rerun to resume from byte "
                                    f"{part.stat().st_size}") from exc  # fmt: skip
            raise
    got_size, got_sha = part.stat().st_size, file_sha256(part)
    if (size is not None and got_size != size) or (sha256 is not None and got_sha != sha256):
        part.unlink()
        raise DownloadError(f"{url}: the download does not match its checksum (size {got_size}, sha256 {got_sha}; "
                            f"expected size {size}, sha256 {sha256}); the partial file was removed, rerun to fetch "
                            "it again")  # fmt: skip
    os.replace(part, target)
    return Downloaded(url, target, got_size, got_sha)


def _member_problem(name: str, link: str | None, link_from_root: bool = False) -> str | None:
    """Why a member may not be unpacked: an absolute path, a `..` step, or a link whose target leaves the
    folder (a symbolic link's target is relative to its own folder, a hard link's to the archive's root)."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        return "an absolute path"
    if ".." in path.parts:
        return "a '..' step out of the folder"
    if link is not None:
        base = "" if link_from_root else str(path.parent)
        landing = posixpath.normpath(posixpath.join(base, link.replace("\\", "/")))
        if posixpath.isabs(link) or landing == ".." or landing.startswith("../"):
            return f"a link to {link}, outside the folder"
    return None


def _members(archive: Path) -> list[tuple[str, str | None, bool]]:
    """(name, link target or None, whether the target is relative to the root) of every member."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as opened:
            return [(info.filename, opened.read(info).decode() if stat.S_ISLNK(info.external_attr >> 16) else None,
                     False) for info in opened.infolist()]  # fmt: skip
    with tarfile.open(archive) as opened:
        return [(m.name, m.linkname if (m.issym() or m.islnk()) else None, m.islnk()) for m in opened.getmembers()]


def extract(archive: Path, dest: Path) -> Path:
    """Unpack a zip or tar archive into `dest` (which appears only when every member is out), refusing one
    whose members could land outside it."""
    try:
        members = _members(archive)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise DownloadError(f"{archive}: not a readable archive ({exc})") from exc
    for name, link, from_root in members:
        problem = _member_problem(name, link, from_root)
        if problem:
            raise DownloadError(f"{archive}: member {name!r} has {problem}; refusing to unpack it")
    partial = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as opened:
                opened.extractall(partial)
        else:
            with tarfile.open(archive) as opened:
                opened.extractall(partial, filter="data")
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise DownloadError(f"{archive}: unpacking failed ({exc})") from exc
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(partial, dest)
    return dest
