"""Where a task finds its perturbed set, and loading it once per process.

Resolution order, first hit wins:
  1. the environment variable LMMS_CONTAM_DATASET_<BENCHMARK> (e.g. LMMS_CONTAM_DATASET_MMSTAR);
  2. `datasets: {<benchmark>: ...}` in the config file ($LMMS_CONTAM_CONFIG, else
     $XDG_CONFIG_HOME/lmms-contam/config.yaml, else ~/.config/lmms-contam/config.yaml);
  3. the default folder $LMMS_CONTAM_HOME/datasets/<benchmark> (LMMS_CONTAM_HOME defaults to
     $XDG_CACHE_HOME/lmms-contam, else ~/.cache/lmms-contam).
A value in 1 or 2 is a `save_to_disk` folder, a parquet file, a folder of parquet files, or a
Hugging Face hub dataset id (split `test`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import datasets
import yaml
from loguru import logger

from lmms_contam.registry.specs import perturb_from_hub, released
from lmms_contam.schema import VERIFIED_SUBSET, PerturbedSetError, manifest_beside, read_set_files, validate

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class PerturbedSetNotFound(PerturbedSetError):
    """No perturbed set at any place the resolution order looks."""


class NotFetchedYet(PerturbedSetNotFound):
    """The tasks would fetch the authors' release on first use, and the caller asked not to fetch."""


@dataclass(frozen=True)
class SetLocation:
    kind: str  # "disk" | "parquet" | "hub"
    value: str
    found_via: str


def env_var(benchmark: str) -> str:
    return f"LMMS_CONTAM_DATASET_{benchmark.upper()}"


def config_path() -> Path:
    if os.environ.get("LMMS_CONTAM_CONFIG"):
        return Path(os.environ["LMMS_CONTAM_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "lmms-contam" / "config.yaml"


def home() -> Path:
    if os.environ.get("LMMS_CONTAM_HOME"):
        return Path(os.environ["LMMS_CONTAM_HOME"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lmms-contam"


def default_folder(benchmark: str) -> Path:
    return home() / "datasets" / benchmark


def _classify(value: str, found_via: str, base: Path | None = None) -> SetLocation:
    path = Path(value).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if path.is_dir() and (path / VERIFIED_SUBSET / "data.parquet").is_file():
        return SetLocation("parquet", str(path / VERIFIED_SUBSET), f"{found_via}, its verified subset")
    if path.is_dir():
        if (path / "state.json").exists() or (path / "dataset_dict.json").exists():
            return SetLocation("disk", str(path), found_via)
        if any(path.glob("*.parquet")):
            return SetLocation("parquet", str(path), found_via)
        raise PerturbedSetError(
            f"{found_via} points to {path}, which holds neither a save_to_disk set nor parquet files"
        )
    if path.is_file():
        if path.suffix != ".parquet":
            raise PerturbedSetError(f"{found_via} points to {path}, which is not a .parquet file")
        return SetLocation("parquet", str(path), found_via)
    if HUB_ID.match(value) and not value.startswith((".", "~")):
        return SetLocation("hub", value, found_via)
    raise PerturbedSetError(f"{found_via} points to {path}, which does not exist")


def read_config() -> tuple[Path, dict | None]:
    """The config file and its content (None when there is no file)."""
    cfg = config_path()
    if not cfg.is_file():
        return cfg, None
    try:
        content = yaml.safe_load(cfg.read_text()) or {}
    except yaml.YAMLError as exc:
        raise PerturbedSetError(f"config {cfg}: not valid YAML ({exc})") from exc
    if not isinstance(content, dict):
        raise PerturbedSetError(f"config {cfg}: expected a mapping at the top level")
    return cfg, content


def lookup(env_name: str, section: str, key: str | None, looked: list[str]) -> tuple[str, str, Path | None] | None:
    """(value, where it was found, base folder for relative paths) from the environment, then the config file.

    `key` None reads `section: value`; otherwise `section: {key: value}`. Misses are appended to `looked`.
    """
    if os.environ.get(env_name):
        return os.environ[env_name], f"${env_name}", None
    looked.append(f"${env_name}: not set")
    cfg, content = read_config()
    entry = f"{section}.{key}" if key else section
    if content is None:
        looked.append(f"config {cfg}: no such file")
        return None
    value = content.get(section)
    if key is not None:
        value = value.get(key) if isinstance(value, dict) else None
    if value in (None, ""):
        looked.append(f"config {cfg}: no {entry} entry")
        return None
    return str(value), f"config {cfg} ({entry})", cfg.parent


ORIGINALS_ENV = "LMMS_CONTAM_ORIGINALS_{}"
AUTO_FETCH_ENV = "LMMS_CONTAM_AUTO_FETCH"


def originals_source(benchmark: str, explicit: str | None = None) -> str | None:
    """The benchmark's originals: an explicit --originals, else $LMMS_CONTAM_ORIGINALS_<BENCHMARK>, else the
    config file's `originals: {<benchmark>: ...}`; None: lmms-eval's hub id. Local paths come back absolute."""
    if explicit:
        return explicit
    found = lookup(ORIGINALS_ENV.format(benchmark.upper()), "originals", benchmark, [])
    if found is None:
        return None
    value, _, base = found
    path = Path(value).expanduser()
    if base is not None and not path.is_absolute() and (base / path).exists():
        path = base / path
    return str(path.resolve()) if path.exists() else value


def switched_on(value: object) -> bool:
    """A yes/no setting from the environment or the config file, read the way HF_HUB_OFFLINE is."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def auto_fetch_allowed() -> bool:
    offline = switched_on(os.environ.get("HF_HUB_OFFLINE", ""))
    return os.environ.get(AUTO_FETCH_ENV, "1").strip() != "0" and not offline


def provision(benchmark: str) -> None:
    """Fetch and import the authors' released set into the default folder, once: lmms-eval under accelerate
    starts a process per GPU, so one downloads under a file lock while the others wait, then read it."""
    from filelock import FileLock

    from lmms_contam.benchmarks.mm_perturb_release import fetch_release
    from lmms_contam.download import DownloadError

    folder = default_folder(benchmark)
    lock = home() / "locks" / "mm-perturb.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        if folder.exists():
            return
        downloads = home() / "downloads" / "mm-perturb"
        logger.info(
            f"lmms-contam: no perturbed set for {benchmark}; fetching the paper authors' release into "
            f"{folder} (downloads kept in {downloads})"
        )
        try:
            summary = fetch_release(
                [benchmark], {benchmark: folder}, downloads, {benchmark: originals_source(benchmark)}
            )[benchmark]
        except (DownloadError, PerturbedSetError, ValueError, OSError) as exc:
            raise PerturbedSetError(
                f"lmms-contam: fetching the released {benchmark} set failed: {exc}. Retry with `lmms-contam fetch "
                f"mm-perturb --benchmark {benchmark}` (downloads resume), or set {AUTO_FETCH_ENV}=0 and point "
                f"{env_var(benchmark)} at a set"
            ) from exc
        logger.info(
            f"lmms-contam: {benchmark}: {summary.kept} of {summary.rows} released rows imported into {folder} "
            "(not verified: see `lmms-contam verify`)"
        )


def resolve(benchmark: str, fetch: bool = True) -> SetLocation:
    """Apply the resolution order; the error lists every place that was looked at. With no set anywhere, the
    authors' released set (MMStar, RealWorldQA) is fetched into the default folder unless downloads are off;
    with `fetch` False, NotFetchedYet says so instead. A folder with a verified subset (`lmms-contam verify`)
    resolves to the subset."""
    looked: list[str] = []
    name = env_var(benchmark)
    found = lookup(name, "datasets", benchmark, looked)
    if found is not None:
        return _classify(found[0], found[1], base=found[2])

    folder = default_folder(benchmark)
    if not folder.exists() and benchmark in released() and auto_fetch_allowed():
        if not fetch:
            from lmms_contam.benchmarks.mm_perturb_release import RELEASE_PAGE

            raise NotFetchedYet(
                f"not here yet: the tasks fetch the paper authors' release ({RELEASE_PAGE}) into "
                f"{folder} on first use; `lmms-contam fetch mm-perturb --benchmark {benchmark}` "
                "fetches it now"
            )
        provision(benchmark)
    if folder.exists():
        return _classify(str(folder), f"default folder {folder}")
    looked.append(f"default folder {folder}: does not exist")

    steps = "\n".join(f"  {i}. {line}" for i, line in enumerate(looked, 1))
    if benchmark in released():
        build = (
            f"Fetch the paper authors' release into the default folder with `lmms-contam fetch mm-perturb "
            f"--benchmark {benchmark}` (done automatically unless {AUTO_FETCH_ENV}=0 or HF_HUB_OFFLINE=1), or point"
        )
    elif benchmark in perturb_from_hub():
        build = (
            f"No released set exists for {benchmark}: build one with `lmms-contam perturb {benchmark} --config "
            "configs/perturb/paper.yaml --out DIR`, then point"
        )
    else:
        build = "Point"
    raise PerturbedSetNotFound(
        f"lmms-contam: no perturbed set for '{benchmark}'. Looked in:\n{steps}\n"
        f"{build} ${name} (or the config file's datasets.{benchmark}) at a perturbed set in the lmms-contam "
        f"schema: a parquet file, a save_to_disk folder or a hub dataset id (README: 'Perturbed sets')."
    )


def manifest_path(location: SetLocation) -> Path | None:
    """The manifest beside a local set (`<name>.manifest.json` beside a file, `data.manifest.json` in a
    folder), where there is one; a hub set has none here."""
    if location.kind == "hub":
        return None
    path = Path(location.value)
    manifest = manifest_beside(path if path.is_file() else path / "data.parquet")
    return manifest if manifest.is_file() else None


def set_files(location: SetLocation) -> set[Path]:
    """The files a local set is made of (resolved): a set file and its manifest, or everything under a set's folder
    (the folder above, for a verified subset: the set it was verified from)."""
    if location.kind == "hub":
        return set()
    path = Path(location.value)
    if path.is_file():
        return {path.resolve(), manifest_beside(path).resolve()}
    folder = path.parent if path.name == VERIFIED_SUBSET else path
    return {file.resolve() for file in folder.rglob("*") if file.is_file()}


def manifest_sha256(location: SetLocation) -> str | None:
    """What names a set in every record scored on it, so the report can open that set and no other."""
    manifest = manifest_path(location)
    return hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest else None


def read_location(location: SetLocation) -> datasets.Dataset:
    """A set as the tasks read it (split `test`), not yet validated."""
    if location.kind == "disk":
        loaded = datasets.load_from_disk(location.value)
        if isinstance(loaded, datasets.DatasetDict):
            if "test" not in loaded:
                raise PerturbedSetError(f"{location.value}: a DatasetDict without a 'test' split")
            loaded = loaded["test"]
        return loaded
    if location.kind == "parquet":
        path = Path(location.value)
        files = sorted(str(p) for p in path.glob("*.parquet")) if path.is_dir() else [str(path)]
        if not files:
            raise PerturbedSetError(f"{path}: no parquet files")
        return read_set_files(files)
    return datasets.load_dataset(location.value, split="test")


_cache: dict[tuple[str, str], datasets.Dataset] = {}
_lock = threading.Lock()


def load_perturbed_set(benchmark: str, fetch: bool = True) -> datasets.Dataset:
    """Resolve, read and validate a benchmark's set once per process (a harness asks for it once per task).
    `fetch` False: a set that is not on this machine is not downloaded (NotFetchedYet instead), as for a reader."""
    location = resolve(benchmark, fetch=fetch)
    with _lock:
        key = (benchmark, location.value)
        if key not in _cache:
            logger.info(f"lmms-contam: {benchmark} perturbed set from {location.value} (via {location.found_via})")
            dataset = read_location(location)
            validate(dataset, benchmark, location.value)
            _cache[key] = dataset
        return _cache[key]
