"""`lmms-contam verify SET`: the perturbation pipeline's verification stage, run on any set.

A counterfactual whose image does not show its new answer is failed by a clean model, so an
unverified set can make a clean model look contaminated. This runs the pipeline's own checks on a
set made anywhere (the authors' release, an import, a set built elsewhere): the judge model keeps an
item only if exactly one option is right and it is the new answer, and the drift check rejects an
image the edit left unchanged or that no longer resembles its original. Verdicts are stored per item
under `SET/verify-work` with their inputs' digest, so a rerun (after Ctrl-C too) repeats no finished
call. The kept items are written to `SET/verified/` (schema v1, with a manifest saying how they were
verified); the tasks read that subset when it exists. `SET/verified/review.html` shows every
candidate; a "keep" or "reject" set in `SET/verified/review.json` is applied on the next run.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from lmms_contam import __version__
from lmms_contam.atomic import atomic_path
from lmms_contam.imaging import decoding_error
from lmms_contam.items import Item
from lmms_contam.llm import ChatClient, TooManyFailures, failure_problems
from lmms_contam.perturb.config import PerturbConfig
from lmms_contam.perturb.review import Counterfactual, decide, load_decisions, write_review
from lmms_contam.perturb.verify import (
    JUDGE_STAGE,
    CounterfactualJob,
    DriftSettings,
    judge_job,
)
from lmms_contam.schema import (
    VERIFIED_SUBSET,
    PerturbedSetError,
    columns_for,
    manifest_beside,
    read_set_files,
    validate,
)
from lmms_contam.store import StageStore


def set_file(folder: Path) -> Path:
    """The set's parquet file: `folder/data.parquet` (as `perturb`, `import` and `fetch` write it)."""
    path = folder / "data.parquet" if folder.is_dir() else folder
    if not path.is_file():
        raise PerturbedSetError(f"{folder}: no data.parquet (a folder written by perturb, import or fetch)")
    return path


def first_image_size(folder: str | Path) -> tuple[int, int]:
    """The size of the set's first counterfactual: what a judge calibrated for this set is shown."""
    source = set_file(Path(folder))
    try:
        first = pq.ParquetFile(source).read_row_group(0, columns=["image"]).slice(0, 1).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise PerturbedSetError(f"{source}: not a readable parquet set ({exc})") from exc
    if not first or not first[0]["image"] or not first[0]["image"].get("bytes"):
        raise PerturbedSetError(f"{source}: no image in its first row")
    try:
        return Image.open(io.BytesIO(first[0]["image"]["bytes"])).size
    except OSError as exc:  # PIL's UnidentifiedImageError among them
        raise PerturbedSetError(f"{source}: row 0: unreadable image ({decoding_error(exc)})") from exc


def _read(path: Path) -> tuple[datasets.Dataset, str]:
    rows = read_set_files([str(path)])
    benchmarks = set(rows["benchmark"]) if "benchmark" in rows.column_names else set()
    if len(benchmarks) != 1:
        raise PerturbedSetError(f"{path}: a set holds one benchmark; found {sorted(benchmarks) or 'none'}")
    benchmark = benchmarks.pop()
    validate(rows, benchmark, str(path))
    return rows, benchmark


def _item(row: dict, benchmark: str) -> Item:
    extra = {name: row[name] for name in columns_for(benchmark).extra}
    return Item(
        benchmark=benchmark,
        original_id=row["original_id"],
        question=row["question"],
        options=tuple(row["options"]),
        answer=row["original_answer"],
        image=row["original_image"],
        extra=extra,
    )


@dataclass(frozen=True)
class VerifiedSubset:
    """What `verify` kept and why the rest went; its manifest holds this and the recipe."""

    benchmark: str
    folder: Path  # <set>/verified/, which the tasks read from now on
    items: int
    kept: int
    outcomes: dict[str, int]  # "kept", or each reason to reject, with its count
    judge_calls: int  # verdicts stored, this run's and earlier runs'
    cost_usd: float


def verify_set(
    folder: str | Path, config: PerturbConfig, max_failure_rate: float = 0.5, calibration: dict | None = None
) -> VerifiedSubset:
    """Judge and drift-check every item of the set in `folder`; write the kept subset and its manifest (with
    the judge's `calibration` record, when one was measured). Raises llm.TooManyFailures (nothing written) when
    the judge's calls fail."""
    if config.judge is None:
        raise ValueError("the recipe has no verify.judge section: verification needs a judge model")
    folder = Path(folder).resolve()
    source = set_file(folder)
    base = source.parent
    rows, benchmark = _read(source)
    store = StageStore(base / "verify-work")
    client = ChatClient(config.judge_endpoint, stage="judge")
    jobs = _jobs(rows, benchmark, config.drift)
    verdicts = client.map(judge_job(client, store, config.judge), jobs, desc=f"verifying {benchmark}")
    problems = failure_problems([client.outcomes], max_failure_rate)
    if problems:
        raise TooManyFailures("; ".join(problems))
    out = base / VERIFIED_SUBSET
    decisions = load_decisions(out / "review.json")
    outcomes, kept, candidates = _decide(jobs, verdicts, decisions)
    write_review(out, candidates, decisions)
    manifest = {
        "kind": "lmms-contam verify",
        "lmms_contam_version": __version__,
        "benchmark": benchmark,
        "source": str(source),
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "items": len(rows),
        "outcomes": dict(outcomes),
        "judge": config.resolved()["judge"],
        "drift": config.resolved()["drift"],
        "api_calls": client.outcomes.as_dict(),
        "cost": store.cost(JUDGE_STAGE),
        "verification": _verification(config, len(kept), len(rows), calibration),
    }
    if not kept:
        earlier = " (an earlier run's subset there is left as it was)" if (out / "data.parquet").exists() else ""
        raise PerturbedSetError(
            f"{source}: no item passed verification ({dict(outcomes)}); no subset written"
            f"{earlier}, see {out / 'review.html'}"
        )
    with atomic_path(out / "data.parquet") as tmp:
        rows.select(kept).to_parquet(str(tmp))
    with atomic_path(manifest_beside(out / "data.parquet")) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    cost = manifest["cost"]
    return VerifiedSubset(
        benchmark=benchmark,
        folder=out,
        items=len(rows),
        kept=len(kept),
        outcomes=dict(outcomes),
        judge_calls=cost["calls"],
        cost_usd=cost["usd"],
    )


def _jobs(rows: datasets.Dataset, benchmark: str, drift: DriftSettings) -> list[CounterfactualJob]:
    """The rows as the pipeline's jobs, so a set made anywhere gets the pipeline's judge and drift check."""
    return [
        CounterfactualJob(
            key=row["item_id"],
            item=_item(row, benchmark),
            new_answer=row["new_answer"],
            caption=json.loads(row["provenance"] or "{}").get("caption") or "",
        ).with_image(row["image"].convert("RGB"), drift)
        for row in rows
    ]


def _decide(
    jobs: list[CounterfactualJob], verdicts: list[dict | BaseException], decisions: dict[str, str]
) -> tuple[Counter, list[int], list[Counterfactual]]:
    """Each item's outcome counted as the pipeline counts it, the kept items' positions, the candidates shown for
    review."""
    outcomes, kept, candidates = Counter(), [], []
    for number, (job, verdict) in enumerate(zip(jobs, verdicts, strict=True)):
        decided = decide(job, verdict, decisions)
        outcomes[decided.outcome] += 1
        if decided.candidate is not None:
            candidates.append(decided.candidate)
        if decided.kept:
            kept.append(number)
    return outcomes, kept, candidates


def _verification(config: PerturbConfig, kept: int, of: int, calibration: dict | None) -> dict:
    """The manifest's record of what verified the subset, which the report shows beside the scores on it."""
    return {
        "verified": True,
        "kept": kept,
        "of": of,
        "by": f"lmms-contam verify (judge {config.judge_endpoint.model} and the drift check)",
        **({"calibration": calibration} if calibration else {}),
    }
