"""Per eval sample: its question, options and answer, and the captions of its corpus matches.

The matches come from a scan's output (`<benchmark>.matches.parquet` + `.summary.json`); the
samples from the same benchmark loader the scan embedded, refused when their ids differ from the
scan's (another benchmark version or local copy).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lmms_contam.benchmarks import loaders
from lmms_contam.corpus import scan
from lmms_contam.corpus.scan_files import read_scan
from lmms_contam.items import Item
from lmms_contam.letters import option_letters

if TYPE_CHECKING:
    import pandas as pd

MAX_CAPTION_CHARS = 500  # alt-text is short; a longer caption is cut here, with a notice


class JudgeInputError(ValueError):
    """A scan or benchmark that cannot be judged as it is; the message names the file."""


@dataclass(frozen=True)
class MatchedSample:
    benchmark: str
    original_id: str
    question: str
    options: tuple[str, ...]
    answer: str  # the gold as the benchmark writes it (a letter, or the option text)
    answer_text: str  # the gold option's text
    captions: tuple[str, ...]  # non-empty captions of matches above the threshold, best first
    similarities: tuple[float, ...]

    @property
    def captions_sha256(self) -> str:
        return hashlib.sha256("\x1f".join(self.captions).encode()).hexdigest()


@dataclass
class ScanInput:
    summary: dict
    candidates: list[MatchedSample]  # samples with at least one captioned match above the threshold
    samples: int  # every eval sample of the scan
    without_captions: int  # matched above the threshold, but every caption empty
    truncated: int  # captions cut to MAX_CAPTION_CHARS


def _answer_text(item: Item) -> str:
    if item.answer in item.options:
        return item.answer
    letters = option_letters(len(item.options))
    if item.answer in letters:
        return item.options[letters.index(item.answer)]
    return item.answer  # open-ended: the answer is its own text


def _check_scanned_ids(
    scans: Path, benchmark: str, originals: str | None, summary: dict, eval_ids: list[str], scanned: list[str]
) -> None:
    """Captions matched against another copy of the benchmark would be judged against the wrong questions."""
    expected = summary.get("eval_ids_sha256")
    if expected is not None and scan.ids_sha256(eval_ids) != expected:
        raise JudgeInputError(
            f"{scans / (benchmark + '.summary.json')}: the scan embedded another version of {benchmark} "
            f"(its eval ids differ from {originals or 'the hub copy'}); judge with the copy the scan used"
        )
    known = set(eval_ids)
    missing = [i for i in scanned if i not in known]
    if missing:
        raise JudgeInputError(f"{benchmark}: {len(missing)} scanned id(s) are not in the benchmark (e.g. {missing[0]})")


def _captioned_matches(
    scans: Path, benchmark: str, matches: pd.DataFrame, threshold: float, top_k: int
) -> tuple[list[tuple[str, list[tuple[str, float]]]], int, int]:
    """Only a caption above the threshold gives the judge text to read; matches without one are only counted."""
    found, without_captions, truncated = [], 0, 0
    for number, row in enumerate(matches.itertuples()):
        if len(row.top_captions) != len(row.top_similarities):
            raise JudgeInputError(
                f"{scans / (benchmark + '.matches.parquet')}: row {number} ({row.original_id}): "
                f"{len(row.top_captions)} captions but {len(row.top_similarities)} similarities"
            )
        pairs = [
            (str(c or "").strip(), float(s))
            for c, s in zip(row.top_captions, row.top_similarities, strict=True)
            if float(s) > threshold
        ][:top_k]
        if not pairs:
            continue
        captioned = [(c, s) for c, s in pairs if c]
        if not captioned:
            without_captions += 1
            continue
        truncated += sum(len(c) > MAX_CAPTION_CHARS for c, _ in captioned)
        found.append((str(row.original_id), captioned))
    return found, without_captions, truncated


def build(
    scans: str | Path, benchmark: str, originals: str | None, threshold: float | None = None, top_k: int | None = None
) -> ScanInput:
    """Candidates from a scan; threshold defaults to the scan's own (the image-only threshold)."""
    scans = Path(scans)
    summary, matches = read_scan(scans, benchmark)
    threshold = summary["threshold"] if threshold is None else threshold
    top_k = summary["k"] if top_k is None else top_k
    rows = loaders.load_rows(benchmark, originals)
    eval_ids = loaders.scanned_ids(benchmark, rows)  # no image decoded: the judge reads text only
    scanned = [str(i) for i in matches["original_id"]]
    _check_scanned_ids(scans, benchmark, originals, summary, eval_ids, scanned)
    found, without_captions, truncated = _captioned_matches(scans, benchmark, matches, threshold, top_k)
    items = loaders.items_of(benchmark, rows, {original_id for original_id, _ in found})
    candidates = [
        MatchedSample(
            benchmark=benchmark,
            original_id=item.original_id,
            question=item.question,
            options=tuple(item.options),
            answer=item.answer,
            answer_text=_answer_text(item),
            captions=tuple(c[:MAX_CAPTION_CHARS] for c, _ in captioned),
            similarities=tuple(s for _, s in captioned),
        )
        for item, captioned in ((items[original_id], captioned) for original_id, captioned in found)
    ]
    summary = {**summary, "judge_threshold": threshold, "judge_top_k": top_k}
    return ScanInput(
        summary=summary,
        candidates=candidates,
        samples=len(scanned),
        without_captions=without_captions,
        truncated=truncated,
    )
