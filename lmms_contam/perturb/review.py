"""Human review: a gallery of every candidate and a decisions file that the next run applies.

The pipeline writes <out>/review.html (original and perturbed image side by side, question, both
answers, caption, judge and drift outcomes) and <out>/review.json, one entry per candidate with
"decision": "auto". Set an entry to "keep" or "reject" and rerun the same command: the set is
rebuilt from the stored stage results with the human decisions, and no API call or image repeats.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from lmms_contam.atomic import atomic_path
from lmms_contam.imaging import thumbnail_uri
from lmms_contam.perturb.verify import CounterfactualJob, automatic_outcome, failure_reason

DECISIONS = ("auto", "keep", "reject")


@dataclass(frozen=True)
class Counterfactual:
    """A judged job, shown for review."""

    job: CounterfactualJob
    automatic: str  # "keep" or the reason for rejecting


@dataclass(frozen=True)
class Decided:
    """One item after verification and review: what the perturbation pipeline and `verify` both keep or count."""

    candidate: Counterfactual | None  # None where its verification failed
    outcome: str  # what the manifest counts it as: "kept", "human: keep", "human: reject" or why it was rejected
    decision: str  # the human's decision in review.json, or "auto"

    @property
    def kept(self) -> bool:
        return self.outcome in ("kept", "human: keep")


def decide(job: CounterfactualJob, verdict: dict | None | BaseException, decisions: dict[str, str]) -> Decided:
    """The automatic outcome, unless a human's decision in review.json overrides it."""
    if isinstance(verdict, BaseException):
        return Decided(candidate=None, outcome=failure_reason(verdict), decision="auto")
    automatic = automatic_outcome(job.drifted, verdict)
    decision = decisions.get(job.key, "auto")
    if decision == "reject" or (decision == "auto" and automatic != "keep"):
        outcome = automatic if decision == "auto" else "human: reject"
    else:
        outcome = "kept" if decision == "auto" else "human: keep"
    return Decided(candidate=Counterfactual(job, automatic), outcome=outcome, decision=decision)


def load_decisions(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    decisions = {}
    for key, entry in entries.items():
        decision = entry.get("decision") if isinstance(entry, dict) else None
        if decision not in DECISIONS:
            raise ValueError(f"{path}: {key}: decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        decisions[key] = decision
    return decisions


def write_review(out: Path, candidates: list[Counterfactual], decisions: dict[str, str]) -> None:
    entries = {
        c.job.key: {
            "decision": decisions.get(c.job.key, "auto"),
            "automatic": c.automatic,
            "original_id": c.job.item.original_id,
        }
        for c in candidates
    }
    with atomic_path(out / "review.json") as tmp:
        tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    cards = []
    for c in candidates:
        job, decision = c.job, decisions.get(c.job.key, "auto")
        cards.append(
            f'<div class="card"><img alt="original" src="{thumbnail_uri(job.item.image)}">'
            f'<img alt="perturbed" src="{thumbnail_uri(job.image)}"><div><b>{html.escape(job.key)}</b>'
            f"<pre>{html.escape(job.item.question)}</pre>"
            f"<p>gold: original <b>{html.escape(job.item.answer)}</b>, perturbed <b>{html.escape(job.new_answer)}</b>"
            f"</p><p>caption: {html.escape(job.caption)}</p><p>automatic: {html.escape(c.automatic)}; "
            f"decision: <b>{decision}</b></p></div></div>"
        )
    page = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>lmms-contam review</title><style>'
        "body{font-family:sans-serif;margin:20px}.card{display:flex;gap:12px;border-top:1px solid #ccc;padding:10px}"
        "img{max-width:256px;max-height:256px}pre{white-space:pre-wrap}</style></head><body>"
        f"<h1>Review: {len(candidates)} candidates</h1><p>Edit review.json beside this page (decision: keep, "
        f"reject or auto) and rerun the same lmms-contam perturb command.</p>{''.join(cards)}</body></html>\n"
    )
    with atomic_path(out / "review.html") as tmp:
        tmp.write_text(page)
