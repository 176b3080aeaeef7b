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
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

import requests
import urllib3
from tqdm.auto import tqdm

from lmms_contam.redact import redact_url

CHUNK = 1 << 20
T = TypeVar("T")


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
    checked: tuple[str, ...] = ()  # what the file was checked against: "size", "sha256" (the expected values)

    def as_dict(self) -> dict:
        return {
            "url": redact_url(self.url),
            "file": self.path.name,
            "size": self.size,
            "sha256": self.sha256,
            "checked": list(self.checked),
        }


def file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            sha.update(block)
    return sha.hexdigest()


def _refusal(response: requests.Response, url: str) -> DownloadError | None:
    """A clear error for the answers that retrying cannot mend."""
    status, url = response.status_code, redact_url(url)
    if status == 404:
        return DownloadError(
            f"{url}: not found (404); check the repository, commit or release tag, or the mirror "
            "in LMMS_CONTAM_GITHUB_API / LMMS_CONTAM_GITHUB_RAW"
        )
    if status in (401, 403) and response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset")
        when = time.strftime("%H:%M UTC", time.gmtime(int(reset))) if reset and reset.isdigit() else "later"
        return DownloadError(
            f"{url}: GitHub's rate limit is used up ({status}); set GITHUB_TOKEN to a token of "
            f"yours, or retry after {when}"
        )
    if status in (401, 403):
        return DownloadError(f"{url}: access refused ({status}); if GITHUB_TOKEN is set, check that it is valid")
    if 400 <= status < 500 and status not in (408, 429):
        return DownloadError(f"{url}: the server refused the request ({status})")
    return None


OFFLINE_HINT = (
    "this machine seems offline; the tasks fetch nothing with LMMS_CONTAM_AUTO_FETCH=0 or "
    "HF_HUB_OFFLINE=1, and `lmms-contam fetch` resumes once the network is there"
)
STALL_ENV = "LMMS_CONTAM_DOWNLOAD_STALL_S"
STALL_BYTES = 64 << 10  # less than this within a stall deadline: the download has stalled


class _Stalled(Exception):
    pass


def stall_deadline() -> float:
    """Seconds within which a download must deliver STALL_BYTES (or finish), else it is given up."""
    value = os.environ.get(STALL_ENV, "60")
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise DownloadError(f"${STALL_ENV}={value!r}: expected a positive number of seconds")
    return seconds


def _unreachable(exc: Exception) -> str | None:
    """Why no connection could be made at all (a name that does not resolve, a refused connection), or None
    for the faults that a retry may mend."""
    cause = exc.args[0] if exc.args else None
    reason = getattr(cause, "reason", cause)
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "its host name does not resolve"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "no connection could be made (refused or unreachable)"
    return None


RETRYABLE = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError, _Retryable)


def _retrying(
    url: str, work: Callable[[], T], retries: int, backoff: float, progress: Callable[[], str] = lambda: ""
) -> T:
    """`work()` retried with backoff on the faults a retry may mend; an unreachable host is tried twice at most
    (an offline machine fails in seconds, not minutes). `progress` says where a rerun resumes."""
    shown = redact_url(url)
    for attempt in range(retries + 1):
        try:
            return work()
        except RETRYABLE as exc:
            unreachable = _unreachable(exc)
            if unreachable and attempt >= 1:
                host = urllib.parse.urlsplit(url).hostname
                raise DownloadError(f"{shown}: cannot reach {host}: {unreachable}; {OFFLINE_HINT}") from exc
            if attempt == retries:
                raise DownloadError(f"{shown}: failed after {retries + 1} tries ({exc}){progress()}") from exc
            time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def get_json(url: str, headers: dict[str, str], retries: int = 4, backoff: float = 1.0) -> object:
    """A JSON document, retried on connection errors and 5xx/429 answers."""

    def once() -> object:
        response = requests.get(url, headers=headers, timeout=30)
        refused = _refusal(response, url)
        if refused:
            raise refused
        if response.status_code >= 400:
            raise _Retryable(f"HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError as exc:
            raise _Retryable(f"not JSON ({exc})") from exc

    return _retrying(url, once, retries, backoff)


def _expected_total(response: requests.Response, have: int) -> int | None:
    if response.status_code == 206:
        total = response.headers.get("content-range", "").rpartition("/")[2]
        return int(total) if total.isdigit() else None
    length = response.headers.get("content-length")
    return int(length) if length and length.isdigit() else None


def _blocks(response: requests.Response, stall_s: float) -> Iterator[bytes]:
    """The body as it arrives (a slow server's bytes are seen at once, not when a whole block is in); a
    download that delivers less than STALL_BYTES within `stall_s`, or nothing for `stall_s`, has stalled."""
    window_start, window_bytes = time.monotonic(), 0
    while True:
        try:
            block = response.raw.read1(CHUNK)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise _Stalled(f"no byte for {stall_s:g} s") from exc
        except urllib3.exceptions.ProtocolError as exc:
            raise requests.exceptions.ChunkedEncodingError(exc) from exc
        if not block:
            return
        yield block
        window_bytes += len(block)
        elapsed = time.monotonic() - window_start
        if elapsed >= stall_s:
            if window_bytes < STALL_BYTES:
                raise _Stalled(f"{window_bytes} byte(s) in the last {elapsed:.0f} s (${STALL_ENV}={stall_s:g})")
            window_start, window_bytes = time.monotonic(), 0


def _fetch_once(url: str, part: Path, headers: dict[str, str], stall_s: float) -> None:
    """Append the rest of `url` to `part` (or start it again if the server ignores the range)."""
    have = part.stat().st_size if part.exists() else 0
    ranged = {**headers, "Range": f"bytes={have}-"} if have else headers
    with requests.get(url, headers=ranged, stream=True, timeout=(15, stall_s)) as response:
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
        # The bar shows once a download has taken two seconds: large files, and small ones on a slow line.
        with (
            open(part, "ab" if have else "wb") as handle,
            tqdm(
                total=total,
                initial=have,
                unit="B",
                unit_scale=True,
                desc=part.name.removesuffix(".part"),
                delay=2,
            ) as progress,
        ):
            for block in _blocks(response, stall_s):
                handle.write(block)
                progress.update(len(block))
        if total is not None and part.stat().st_size < total:
            raise _Retryable(f"connection closed at byte {part.stat().st_size} of {total}")


def _matches(path: Path, size: int | None, sha256: str | None) -> tuple[bool, str]:
    """Whether a file is what the listing says (size always where given, then the digest), and its SHA-256."""
    if size is not None and path.stat().st_size != size:
        return False, ""
    digest = file_sha256(path)
    return sha256 is None or digest == sha256, digest


def download(
    url: str,
    target: Path,
    *,
    headers: dict[str, str] | None = None,
    sha256: str | None = None,
    size: int | None = None,
    retries: int = 5,
    backoff: float = 1.0,
) -> Downloaded:
    """`url` into `target`, resumed where an earlier try stopped, then checked against `size` and `sha256`
    where given. A target already there is reused only when it matches both; one that does not is fetched
    again."""
    target.parent.mkdir(parents=True, exist_ok=True)
    checked = tuple(name for name, value in (("size", size), ("sha256", sha256)) if value is not None)
    if target.exists():
        right, digest = _matches(target, size, sha256)
        if right:
            return Downloaded(url=url, path=target, size=target.stat().st_size, sha256=digest, checked=checked)
        target.unlink()
    part = target.with_name(target.name + ".part")
    stall_s = stall_deadline()
    resume = lambda: f"; rerun to resume from byte {part.stat().st_size if part.exists() else 0}"  # noqa: E731
    try:
        _retrying(url, lambda: _fetch_once(url, part, headers or {}, stall_s), retries, backoff, resume)
    except _Stalled as exc:
        raise DownloadError(f"{redact_url(url)}: the download stalled ({exc}){resume()}") from exc
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # a full disk, a quota, a file size limit
            raise DownloadError(
                f"{part}: no room to write ({exc}); free space and rerun to resume from byte {part.stat().st_size}"
            ) from exc
        raise
    right, got_sha = _matches(part, size, sha256)
    if not right:
        got_size = part.stat().st_size
        part.unlink()
        raise DownloadError(
            f"{redact_url(url)}: the download does not match its checksum (size {got_size}, sha256 "
            f"{got_sha or 'not computed'}; expected size {size}, sha256 {sha256}); the partial file "
            "was removed, rerun to fetch it again"
        )
    os.replace(part, target)
    return Downloaded(url=url, path=target, size=target.stat().st_size, sha256=got_sha, checked=checked)


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


@dataclass(frozen=True)
class _Member:
    name: str
    link: str | None = None  # a link's target
    link_from_root: bool = False  # a hard link's target is relative to the archive's root
    refused_kind: str | None = None  # why a member of its kind may not be unpacked at all


def _zip_member(opened: zipfile.ZipFile, info: zipfile.ZipInfo) -> _Member:
    if not stat.S_ISLNK(info.external_attr >> 16):
        return _Member(info.filename)
    try:
        return _Member(info.filename, opened.read(info).decode())
    except UnicodeDecodeError:
        return _Member(info.filename, refused_kind="a link target that is not UTF-8 text")


def _tar_member(member: tarfile.TarInfo) -> _Member:
    if member.isfile() or member.isdir():
        return _Member(member.name)
    if member.issym() or member.islnk():
        return _Member(member.name, member.linkname, member.islnk())
    kind = "a FIFO" if member.isfifo() else "a device" if member.isdev() else "an unknown type"
    return _Member(member.name, refused_kind=f"a special file type ({kind})")


def _members(archive: Path) -> list[_Member]:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as opened:
            return [_zip_member(opened, info) for info in opened.infolist()]
    with tarfile.open(archive) as opened:
        return [_tar_member(member) for member in opened.getmembers()]


def extract(archive: Path, dest: Path) -> Path:
    """Unpack a zip or tar archive into `dest` (which appears only when every member is out), refusing one
    whose members could land outside it or are not plain files, folders or links (a FIFO, a device)."""
    try:
        members = _members(archive)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise DownloadError(f"{archive}: not a readable archive ({exc})") from exc
    for member in members:
        problem = member.refused_kind or _member_problem(member.name, member.link, member.link_from_root)
        if problem:
            raise DownloadError(f"{archive}: member {member.name!r} has {problem}; refusing to unpack it")
    partial = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as opened:
                opened.extractall(partial)
        else:
            with tarfile.open(archive) as opened:
                opened.extractall(partial, filter="data")
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:  # TarError: the data filter's refusals
        shutil.rmtree(partial, ignore_errors=True)
        raise DownloadError(f"{archive}: unpacking failed ({type(exc).__name__}: {exc}); nothing was unpacked") from exc
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(partial, dest)
    return dest
