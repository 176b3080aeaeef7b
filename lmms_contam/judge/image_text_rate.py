"""`lmms-contam judge`: the image-text contamination rate of a scanned benchmark.

Writes `<scans>/<benchmark>.judge.parquet` (one row per sample with a captioned match above the
threshold: the pre-filter's hit, each judge's verdict, caption and reason) and
`<benchmark>.judge.json` (rates, counts, agreement, usage), both atomically.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from lmms_contam.atomic import atomic_path
from lmms_contam.judge import ANSWERABLE, UNJUDGED
from lmms_contam.judge import candidates as candidates_mod
from lmms_contam.judge.caption_judge import DEFAULT_TEMPLATE, CaptionJudgeSettings, judge_captions
from lmms_contam.judge.ngram import PrefilterHit, prefilter
from lmms_contam.llm import CallOutcomes, ChatClient, EndpointConfig, TooManyFailures, failure_problems
from lmms_contam.store import StageStore

JUDGE_VERSION = 1


def _verdicts(
    endpoint: EndpointConfig,
    settings: CaptionJudgeSettings,
    store: StageStore,
    found: list,
    replica: int,
    benchmark: str,
) -> tuple[list[dict], dict, CallOutcomes]:
    """One judge's records for every candidate (an API failure after the SDK's retries is unjudged)."""
    client = ChatClient(endpoint, stage=f"judge {endpoint.model}" + (f" (replica {replica})" if replica else ""))
    outcomes = client.map(
        lambda c: judge_captions(client, store, c, settings, replica),
        found,
        desc=f"judging {benchmark} ({endpoint.model})",
    )
    records, hits = [], 0
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            records.append(
                {
                    "outcome": UNJUDGED,
                    "caption": None,
                    "reason": f"API error: {client.describe(outcome)}",
                    "model": endpoint.model,
                }
            )
        else:
            record, cached = outcome
            hits += cached
            records.append(record)
    usage = {
        **client.usage.as_dict(),
        "cache_hits": hits,
        "model": endpoint.model,
        "api_failures": client.outcomes.failed,
    }
    return records, usage, client.outcomes


def second_judge(endpoint: EndpointConfig, model: str | None, twice: bool) -> EndpointConfig | None:
    """The judge whose agreement is reported: another model at the same endpoint, or with `twice` the
    same judge again (judge_benchmark then re-judges with another seed)."""
    if model and twice:
        raise ValueError("a second model and judging twice exclude each other")
    if model:
        return replace(endpoint, model=model)
    return endpoint if twice else None


@dataclass(frozen=True)
class Agreement:
    second: str  # the second judge's model ("(another seed)" when the same judge asked again)
    judged_by_both: int
    agree: int
    rate: float


@dataclass(frozen=True)
class Verdicts:
    """The first judge's verdicts; a second judge only measures the agreement."""

    settings: dict
    counts: dict[str, int]
    image_text_rate: float
    image_text_rate_upper: float  # unjudged samples are not clean: the rate were they all answerable
    usage: list[dict]
    complete: bool  # False: too many calls failed, and the report shows no rate
    problems: list[str]
    agreement: Agreement | None = None


@dataclass(frozen=True)
class JudgeSummary:
    judge_version: int
    benchmark: str
    samples: int
    threshold: float
    top_k: int
    image_only_rate: float | None
    scan_recipe: dict | None
    matched_with_captions: int
    matched_without_captions: int
    captions_truncated: int
    prefilter_hits: int
    prefilter_rate: float
    judge: Verdicts | None = None  # None: the pre-filter only

    def as_dict(self) -> dict:
        """The .judge.json document: a section that was not made is left out."""
        document = asdict(self)
        if self.judge is None:
            del document["judge"]
        elif self.judge.agreement is None:
            del document["judge"]["agreement"]
        return document


def _agreement(first: list[dict], second: list[dict], label: str) -> Agreement:
    pairs = [
        (a["outcome"], b["outcome"])
        for a, b in zip(first, second, strict=True)
        if UNJUDGED not in (a["outcome"], b["outcome"])
    ]
    agree = sum(a == b for a, b in pairs)
    return Agreement(
        second=label, judged_by_both=len(pairs), agree=agree, rate=agree / len(pairs) if pairs else float("nan")
    )


def _prefilter_rows(candidates: list[candidates_mod.MatchedSample], hits: list[PrefilterHit | None]) -> list[dict]:
    """The parquet keeps each candidate's evidence so a reader can check why it was flagged."""
    return [
        {
            "original_id": c.original_id,
            "captions": list(c.captions),
            "similarities": list(c.similarities),
            "prefilter_hit": hit is not None,
            "prefilter_gram": hit.gram if hit else None,
            "prefilter_caption": hit.caption + 1 if hit else None,
        }
        for c, hit in zip(candidates, hits, strict=True)
    ]


def _add_judge_columns(rows: list[dict], results: list[tuple[list[dict], dict, CallOutcomes]]) -> None:
    """Every judge's verdict sits beside the pre-filter's so disagreements can be read row by row."""
    for number, (records, _, _) in enumerate(results, 1):
        for row, record in zip(rows, records, strict=True):
            row.update(
                {
                    f"judge{number}_outcome": record["outcome"],
                    f"judge{number}_caption": record["caption"],
                    f"judge{number}_reason": record["reason"],
                }
            )


def _judge_candidates(
    scans: Path,
    benchmark: str,
    data: candidates_mod.ScanInput,
    rows: list[dict],
    endpoint: EndpointConfig,
    settings: CaptionJudgeSettings | None,
    second: EndpointConfig | None,
    max_failure_rate: float,
) -> Verdicts:
    """An n-gram overlap is only a hint; the rate counts the captions a judge found to give the answer away."""
    settings = settings or CaptionJudgeSettings.from_file(DEFAULT_TEMPLATE)
    store = StageStore(scans / "judge-cache")
    judges = [(endpoint, 0)]
    if second is not None:
        judges.append((second, 1 if second == endpoint else 0))
    results = [_verdicts(e, settings, store, data.candidates, replica, benchmark) for e, replica in judges]
    _add_judge_columns(rows, results)
    counts = Counter(r["outcome"] for r in results[0][0])
    problems = failure_problems([outcomes for _, _, outcomes in results], max_failure_rate)
    agreement = None
    if second is not None:
        label = second.model + (" (another seed)" if second == endpoint else "")
        agreement = _agreement(results[0][0], results[1][0], label)
    return Verdicts(
        settings=settings.described(),
        counts=dict(counts),
        image_text_rate=counts[ANSWERABLE] / data.samples,
        image_text_rate_upper=(counts[ANSWERABLE] + counts[UNJUDGED]) / data.samples,
        usage=[usage for _, usage, _ in results],
        complete=not problems,
        problems=problems,
        agreement=agreement,
    )


def _write_outputs(scans: Path, benchmark: str, rows: list[dict], summary: JudgeSummary) -> None:
    """Written atomically so the report never reads a half-written judgement, even after a crash."""
    with atomic_path(scans / f"{benchmark}.judge.parquet") as tmp:
        pd.DataFrame(rows, columns=list(rows[0]) if rows else ["original_id"]).to_parquet(tmp)
    with atomic_path(scans / f"{benchmark}.judge.json") as tmp:
        tmp.write_text(json.dumps(summary.as_dict(), indent=2) + "\n")


def judge_benchmark(
    scans: str | Path,
    benchmark: str,
    *,
    originals: str | None = None,
    endpoint: EndpointConfig | None = None,
    settings: CaptionJudgeSettings | None = None,
    second: EndpointConfig | None = None,
    threshold: float | None = None,
    top_k: int | None = None,
    max_failure_rate: float = 0.5,
) -> JudgeSummary:
    """Pre-filter every candidate; with an endpoint, judge it too (and again with `second`, for agreement).

    `second` may be the same endpoint: it then re-judges with another seed (replica 1). When no call of
    a judge succeeded, or more than `max_failure_rate` of its samples failed, the outputs are written with
    the counts and `complete: false` (the report shows no rate for them), then llm.TooManyFailures is raised.
    """
    scans = Path(scans)
    data = candidates_mod.build(scans, benchmark, originals, threshold, top_k)
    hits = [prefilter(c) for c in data.candidates]
    rows = _prefilter_rows(data.candidates, hits)
    verdicts = None
    if endpoint is not None:
        verdicts = _judge_candidates(scans, benchmark, data, rows, endpoint, settings, second, max_failure_rate)
    summary = JudgeSummary(
        judge_version=JUDGE_VERSION,
        benchmark=benchmark,
        samples=data.samples,
        threshold=data.summary["judge_threshold"],
        top_k=data.summary["judge_top_k"],
        image_only_rate=data.summary.get("image_only_rate"),
        scan_recipe=data.summary.get("recipe"),
        matched_with_captions=len(data.candidates),
        matched_without_captions=data.without_captions,
        captions_truncated=data.truncated,
        prefilter_hits=sum(h is not None for h in hits),
        prefilter_rate=sum(h is not None for h in hits) / data.samples if data.samples else float("nan"),
        judge=verdicts,
    )
    _write_outputs(scans, benchmark, rows, summary)
    if verdicts is not None and verdicts.problems:
        raise TooManyFailures("; ".join(verdicts.problems))
    return summary
