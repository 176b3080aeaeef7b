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
from lmms_contam.perturb.review import Counterfactual, load_decisions, write_review
from lmms_contam.perturb.swap import swap_answer
from lmms_contam.perturb.verify import answer_letter, automatic_outcome, drift, judge_counterfactual
from lmms_contam.schema import SCHEMA_VERSION, write_parquet
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


def run(
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
    ready: list[tuple[str, Item, str]] = []
    for item in items:
        if isinstance(item, Skipped):
            counts["load"][item.reason] += 1
            continue
        new_answer = swap_answer(item, config.seed)
        if isinstance(new_answer, Skipped):
            counts["swap"][new_answer.reason] += 1
            continue
        ready.append((f"{benchmark}-{item.original_id}-s{config.seed}", item, new_answer))
    ready = ready[index::count]

    captioner = ChatClient(config.caption_endpoint, stage="caption")
    captions = captioner.map(
        lambda job: write_caption(captioner, store, job[0], job[1], job[2], config.caption), ready, desc="caption"
    )
    captioned = []
    for job, caption in zip(ready, captions, strict=True):
        if isinstance(caption, BaseException):
            counts["caption"][f"failed: {type(caption).__name__}"] += 1
        else:
            captioned.append((*job, caption["caption"]))

    editor = editor or FluxEditor(config.generate)
    described = editor.describe()

    def image_inputs(key: str, item: Item, caption: str) -> dict:
        return {"image": image_sha256(item.image), "caption": caption, "seed": config.generate.seed_for(key),
                "editor": described}  # fmt: skip

    todo = [job for job in captioned if store.get_bytes(IMAGE_STAGE, job[0], image_inputs(job[0], job[1], job[3]),
                                                        ".png") is None]  # fmt: skip
    chunk = max(1, getattr(config.generate, "batch_size", 1)) * 4
    for start in tqdm(range(0, len(todo), chunk), desc="edit", disable=not todo):
        batch = todo[start : start + chunk]
        requests = [EditRequest(key, item.image, caption, config.generate.seed_for(key))
                    for key, item, _, caption in batch]  # fmt: skip
        for (key, item, _, caption), image in zip(batch, editor.edit(requests), strict=True):
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
            store.put_bytes(IMAGE_STAGE, key, image_inputs(key, item, caption), buffer.getvalue(), ".png")

    judge_client = ChatClient(config.judge_endpoint, stage="judge") if config.judge is not None else None
    verdicts = []
    for key, item, new_answer, caption in captioned:
        image = Image.open(store.path(IMAGE_STAGE, key, ".png")).convert("RGB")
        verdicts.append((key, item, new_answer, caption, image, drift(item.image, image, config.drift)))

    def check(job):
        key, item, new_answer, _, image, _ = job
        return judge_counterfactual(
            judge_client, store, key, item, image, answer_letter(item, new_answer), config.judge
        )

    judged = judge_client.map(check, verdicts, desc="judge") if judge_client else [None] * len(verdicts)
    decisions = load_decisions(out / "review.json")
    rows, candidates = [], []
    for (key, item, new_answer, caption, image, drifted), verdict in zip(verdicts, judged, strict=True):
        if isinstance(verdict, BaseException):
            counts["verify"][f"judge failed: {type(verdict).__name__}"] += 1
            continue
        automatic = automatic_outcome(drifted, verdict)
        candidates.append(Counterfactual(key, item, new_answer, caption, image, automatic))
        decision = decisions.get(key, "auto")
        if decision == "reject" or (decision == "auto" and automatic != "keep"):
            counts["verify"][automatic if decision == "auto" else "human: reject"] += 1
        else:
            rows.append(_row(benchmark, key, item, new_answer, caption, store, config, drifted, verdict, decision))
    if count == 1:
        write_review(out, candidates, decisions)
    clients = [captioner, *([judge_client] if judge_client else [])]
    summary = {"items": len(ready) + sum(counts["load"].values()) + sum(counts["swap"].values()),
               "kept": len(rows), "skipped": {stage: dict(c) for stage, c in counts.items() if c},
               "api_calls": {c.outcomes.stage: c.outcomes.as_dict() for c in clients}}  # fmt: skip
    problems = failure_problems([c.outcomes for c in clients], max_failure_rate)
    if problems:
        if count == 1:
            (out / "data.parquet").unlink(missing_ok=True)
            _write_manifest(out, benchmark, config, editor, {**summary, "complete": False, "problems": problems},
                            store)  # fmt: skip
        raise TooManyFailures("; ".join(problems))
    result = PerturbResult(summary["items"], summary["kept"], summary["skipped"], _cost(store))
    if count > 1:
        return replace(result, shard=f"{index}/{count}")
    if rows:
        write_parquet(rows, benchmark, out / "data.parquet")
    _write_manifest(out, benchmark, config, editor, {**summary, "complete": True}, store)
    return result


def _write_manifest(out: Path, benchmark: str, config: PerturbConfig, editor: Editor, summary: dict,
                    store: StageStore) -> None:  # fmt: skip
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
        },  # fmt: skip
        "cost": _cost(store),
    }
    with atomic_path(out / "data.manifest.json") as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")


def _row(benchmark, key, item, new_answer, caption, store, config, drifted, verdict, decision) -> dict:
    provenance = {"source": "lmms-contam perturb", "caption": caption, "edit_seed": config.generate.seed_for(key),
                  "editor": config.generate.backend, "base_model": config.generate.base_model,
                  "drift": drifted, "judge": None if verdict is None else verdict["outcome"],
                  "human": decision}  # fmt: skip
    return {
        "item_id": key,
        "original_id": item.original_id,
        "benchmark": benchmark,
        "question": item.question,
        "options": list(item.options),
        "original_answer": item.answer,
        "new_answer": new_answer,
        "original_image": item.image,
        "image": {"bytes": store.path(IMAGE_STAGE, key, ".png").read_bytes(), "path": None},
        "provenance": json.dumps(provenance),
        "schema_version": SCHEMA_VERSION,
        **item.extra,
    }


def _cost(store: StageStore) -> dict:
    return {stage: store.cost(stage) for stage in ("caption", "judge")}
