"""`lmms-contam perturb`: items -> swap -> caption -> edit -> verify -> perturbed set + manifest.

Every stage's result per item lives in a keyed store under <out>/work and is written when it
completes, so a rerun after a crash repeats no finished API call or image. Items that cannot go on
are counted by stage and reason in the manifest, never dropped silently.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from PIL import Image
from tqdm.auto import tqdm

from lmms_contam import __version__
from lmms_contam.atomic import atomic_path
from lmms_contam.fingerprint import image_sha256
from lmms_contam.items import Item, Skipped
from lmms_contam.llm import ChatClient, TooManyFailures, failure_problems
from lmms_contam.perturb.caption import write_caption
from lmms_contam.perturb.config import PerturbConfig
from lmms_contam.perturb.edit import Editor, EditRequest, FluxEditor
from lmms_contam.perturb.review import Counterfactual, decide, load_decisions, write_review
from lmms_contam.perturb.swap import swap_answer
from lmms_contam.perturb.verify import CounterfactualJob, judge_job
from lmms_contam.schema import SCHEMA_VERSION, manifest_beside, write_parquet
from lmms_contam.store import StageStore

IMAGE_STAGE = "image"


@dataclass(frozen=True)
class PerturbResult:
    """What a run built (the manifest holds this with the recipe and the editor's models)."""

    items: int
    kept: int
    skipped: dict[str, dict[str, int]]  # per stage, each reason with its count
    cost: dict[str, dict]  # per API stage: calls, tokens and dollars of every stored answer
    shard: str | None = None  # "I/N": one shard's stage results only, nothing assembled


def perturb_benchmark(
    benchmark: str,
    items: Iterable[Item | Skipped],
    config: PerturbConfig,
    out: str | Path,
    editor: Editor | None = None,
    shard: tuple[int, int] = (0, 1),
    max_failure_rate: float = 0.5,
) -> PerturbResult:
    """Run every stage; with shard=(i, n) only every n-th item from the i-th (one process per GPU),
    leaving the assembly to a final run without a shard, which finds every stage result stored.

    When no API call of a stage succeeded, or more than `max_failure_rate` of its items failed, the
    manifest records the counts (with `complete: false`), no set is written (an earlier one is removed),
    and llm.TooManyFailures is raised: a set built from a few survivors must not look like the set."""
    index, count = shard
    if not 0 <= index < count:
        raise ValueError(f"shard must be i/n with 0 <= i < n, got {index}/{count}")
    out = Path(out)
    store = StageStore(out / "work")
    counts: dict[str, Counter] = {stage: Counter() for stage in ("load", "swap", "caption", "edit", "verify")}
    # 1. Swap: a new gold answer per item (this shard's share of them).
    ready = _swapped(benchmark, items, config.seed, counts)[index::count]
    # 2. Caption: the VLM's edit caption for each.
    captioner, captioned = _captioned(ready, config, store, counts["caption"])
    # 3. Edit: the counterfactual image of each, then its drift check.
    editor = editor or FluxEditor(config.generate)
    edited = _edited(captioned, editor, config, store)
    # 4. Judge each counterfactual (when the recipe has a judge).
    judge_client, verdicts = _judged(edited, config, store)
    # 5. Decide: the automatic outcome, unless a human's decision in review.json overrides it.
    decisions = load_decisions(out / "review.json")
    candidates, accepted = _decide(edited, verdicts, decisions, counts["verify"])
    rows = [_row(benchmark, job, store, config, verdict, decision) for job, verdict, decision in accepted]
    if count == 1:
        write_review(out, candidates, decisions)
    # 6. Write the set and its manifest, unless too many API calls failed (then nothing that looks complete).
    clients = [captioner, *([judge_client] if judge_client else [])]
    summary = _summary(len(ready), len(rows), counts, clients)
    problems = failure_problems([c.outcomes for c in clients], max_failure_rate)
    if problems:
        if count == 1:
            (out / "data.parquet").unlink(missing_ok=True)
            _write_manifest(out, benchmark, config, editor, {**summary, "complete": False, "problems": problems}, store)
        raise TooManyFailures("; ".join(problems))
    result = PerturbResult(items=summary["items"], kept=summary["kept"], skipped=summary["skipped"], cost=_cost(store))
    if count > 1:
        return replace(result, shard=f"{index}/{count}")
    if rows:
        write_parquet(rows, benchmark, out / "data.parquet")
    _write_manifest(out, benchmark, config, editor, {**summary, "complete": True}, store)
    return result


def _swapped(
    benchmark: str, items: Iterable[Item | Skipped], seed: int, counts: dict[str, Counter]
) -> list[CounterfactualJob]:
    """A job per item that can take part; the others counted by stage and reason."""
    jobs = []
    for item in items:
        if isinstance(item, Skipped):
            counts["load"][item.reason] += 1
            continue
        new_answer = swap_answer(item, seed)
        if isinstance(new_answer, Skipped):
            counts["swap"][new_answer.reason] += 1
            continue
        jobs.append(CounterfactualJob(f"{benchmark}-{item.original_id}-s{seed}", item, new_answer))
    return jobs


def _captioned(
    jobs: list[CounterfactualJob], config: PerturbConfig, store: StageStore, failed: Counter
) -> tuple[ChatClient, list[CounterfactualJob]]:
    """Each job with the VLM's caption the edit follows (failures counted); its client too, for the call counts."""
    captioner = ChatClient(config.caption_endpoint, stage="caption")
    captions = captioner.map(
        lambda job: write_caption(captioner, store, job.key, job.item, job.new_answer, config.caption),
        jobs,
        desc="caption",
    )
    captioned = []
    for job, caption in zip(jobs, captions, strict=True):
        if isinstance(caption, BaseException):
            failed[f"failed: {type(caption).__name__}"] += 1
        else:
            captioned.append(replace(job, caption=caption["caption"]))
    return captioner, captioned


def _edited(
    jobs: list[CounterfactualJob], editor: Editor, config: PerturbConfig, store: StageStore
) -> list[CounterfactualJob]:
    """Every job with its image: stored ones reused, the rest generated in batches and stored as they come."""
    described = editor.describe()

    def inputs(job: CounterfactualJob) -> dict:
        return {
            "image": image_sha256(job.item.image),
            "caption": job.caption,
            "seed": config.generate.seed_for(job.key),
            "editor": described,
        }

    todo = [job for job in jobs if store.get_bytes(IMAGE_STAGE, job.key, inputs(job), ".png") is None]
    chunk = max(1, getattr(config.generate, "batch_size", 1)) * 4
    for start in tqdm(range(0, len(todo), chunk), desc="edit", disable=not todo):
        batch = todo[start : start + chunk]
        requests = [
            EditRequest(key=job.key, image=job.item.image, caption=job.caption, seed=config.generate.seed_for(job.key))
            for job in batch
        ]
        for job, image in zip(batch, editor.edit(requests), strict=True):
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
            store.put_bytes(IMAGE_STAGE, job.key, inputs(job), buffer.getvalue(), ".png")
    return [
        job.with_image(Image.open(store.path(IMAGE_STAGE, job.key, ".png")).convert("RGB"), config.drift)
        for job in jobs
    ]


def _judged(
    jobs: list[CounterfactualJob], config: PerturbConfig, store: StageStore
) -> tuple[ChatClient | None, list[dict | None | BaseException]]:
    """The judge's verdict on each counterfactual, or None for each when the recipe leaves it to the drift check."""
    judge_client = ChatClient(config.judge_endpoint, stage="judge") if config.judge is not None else None
    verdicts = (
        judge_client.map(judge_job(judge_client, store, config.judge), jobs, desc="judge")
        if judge_client
        else [None] * len(jobs)
    )
    return judge_client, verdicts


def _decide(
    jobs: list[CounterfactualJob],
    verdicts: list[dict | None | BaseException],
    decisions: dict[str, str],
    rejected: Counter,
) -> tuple[list[Counterfactual], list[tuple[CounterfactualJob, dict | None, str]]]:
    """The candidates shown for review and the accepted items with their verdicts; rejections counted."""
    candidates, accepted = [], []
    for job, verdict in zip(jobs, verdicts, strict=True):
        decided = decide(job, verdict, decisions)
        if decided.candidate is not None:
            candidates.append(decided.candidate)
        if decided.kept:
            accepted.append((job, verdict, decided.decision))
        else:
            rejected[decided.outcome] += 1
    return candidates, accepted


def _summary(swapped: int, kept: int, counts: dict[str, Counter], clients: list[ChatClient]) -> dict:
    """The counts the manifest records whether or not the run completes, so that every item is accounted for."""
    return {
        "items": swapped + sum(counts["load"].values()) + sum(counts["swap"].values()),
        "kept": kept,
        "skipped": {stage: dict(c) for stage, c in counts.items() if c},
        "api_calls": {c.outcomes.stage: c.outcomes.as_dict() for c in clients},
    }


def _write_manifest(
    out: Path, benchmark: str, config: PerturbConfig, editor: Editor, summary: dict, store: StageStore
) -> None:
    manifest = {
        "kind": "lmms-contam perturb",
        "lmms_contam_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "benchmark": benchmark,
        "config": config.resolved(),
        "editor": editor.describe(),  # model ids with their resolved commits or local paths
        **summary,
        "verification": {
            "verified": config.judge is not None,
            "kept": summary["kept"],
            "of": summary["items"],
            "by": f"judge {config.judge_endpoint.model} and the drift check"
            if config.judge
            else "the drift check only (no judge in the recipe)",
        },
        "cost": _cost(store),
    }
    with atomic_path(manifest_beside(out / "data.parquet")) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")


def _row(
    benchmark: str,
    job: CounterfactualJob,
    store: StageStore,
    config: PerturbConfig,
    verdict: dict | None,
    decision: str,
) -> dict:
    provenance = {
        "source": "lmms-contam perturb",
        "caption": job.caption,
        "edit_seed": config.generate.seed_for(job.key),
        "editor": config.generate.backend,
        "base_model": config.generate.base_model,
        "drift": job.drifted,
        "judge": None if verdict is None else verdict["outcome"],
        "human": decision,
    }
    item = job.item
    return {
        "item_id": job.key,
        "original_id": item.original_id,
        "benchmark": benchmark,
        "question": item.question,
        "options": list(item.options),
        "original_answer": item.answer,
        "new_answer": job.new_answer,
        "original_image": item.image,
        "image": {"bytes": store.path(IMAGE_STAGE, job.key, ".png").read_bytes(), "path": None},
        "provenance": json.dumps(provenance),
        "schema_version": SCHEMA_VERSION,
        **item.extra,
    }


def _cost(store: StageStore) -> dict:
    return {stage: store.cost(stage) for stage in ("caption", "judge")}
