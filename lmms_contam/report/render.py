"""Markdown and versioned JSON renderings of the analysed results."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import asdict

from lmms_contam import __version__
from lmms_contam.detectors.base import Detector
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.detectors.signals import DetectorSignal
from lmms_contam.flags import IMAGE_ONLY, IMAGE_TEXT
from lmms_contam.report.analysis import (
    CONTAMINATED,
    INCONCLUSIVE,
    NO_EVIDENCE,
    Analysed,
    BenchmarkResult,
    ScannedResult,
)
from lmms_contam.stats import MIN_SUBSET

REPORT_VERSION = 1
MARK = {CONTAMINATED: "contaminated", NO_EVIDENCE: "no evidence", INCONCLUSIVE: "inconclusive"}
FLAG_LABELS = {IMAGE_ONLY: "image-only", IMAGE_TEXT: "image-text"}


def _number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def pct(value: float) -> str:
    return "n/a" if _number(value) is None else f"{100 * value:.1f}"


def delta_text(result: BenchmarkResult) -> str:
    c = result.comparison
    return f"{100 * c.delta:+.1f} [{100 * c.ci_low:+.1f}, {100 * c.ci_high:+.1f}]"


def p_text(value: float) -> str:
    return "n/a" if _number(value) is None else (f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}")


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _benchmarks(count: int) -> str:
    return f"{count} benchmark{'s' if count != 1 else ''}"


def model_sentences(analysed: Analysed) -> list[str]:
    """One sentence per model, what a reader should conclude: where the perturbation calls it contaminated
    (with the delta and the Holm-adjusted p), where a drop is not significant, and where there is no
    evidence; a verdict on an unverified set says so."""
    by_model: dict[str, list[BenchmarkResult]] = {}
    for result in sorted(analysed.results, key=lambda r: r.benchmark):
        by_model.setdefault(result.model, []).append(result)
    sentences = []

    def contaminated_first(model: str) -> tuple[bool, str]:
        return all(r.verdict != CONTAMINATED for r in by_model[model]), analysed.names[model].lower()

    for model in sorted(by_model, key=contaminated_first):
        results = by_model[model]
        contaminated = [r for r in results if r.verdict == CONTAMINATED]
        dropped = [r for r in results if r.verdict == INCONCLUSIVE]
        clean = [r for r in results if r.verdict == NO_EVIDENCE]
        parts = []
        if contaminated:
            parts.append(
                "contaminated on "
                + _listed(
                    [
                        f"{r.benchmark} (delta {100 * r.comparison.delta:+.1f} points, p {p_text(r.p_adjusted)}"
                        + (", set NOT verified" if r.scored_set and r.scored_set.verified is False else "")
                        + ")"
                        for r in contaminated
                    ]
                )
            )
        if dropped:
            parts.append(f"a drop that is not significant on {_listed([r.benchmark for r in dropped])}")
        if clean:
            parts.append(f"no evidence on {'the other ' if parts else ''}{_benchmarks(len(clean))}")
        if dropped or clean:
            parts[-1] += _detectable([*dropped, *clean])
        sentences.append(f"{analysed.names[model]}: {'; '.join(parts)}.")
    return sentences


def _detectable(results: list[BenchmarkResult]) -> str:
    """How large a drop the verdicts short of contamination could have missed (80% power, Holm's strictest step)."""
    drops = [r.minimum_detectable_drop for r in results]
    if any(drop is None for drop in drops):
        too_small = [r.benchmark for r in results if r.minimum_detectable_drop is None]
        return f" (too few pairs to detect any drop on {_listed(too_small)})"
    low, high = 100 * min(drops), 100 * max(drops)
    size = f"{low:.1f}" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}"
    return f" (a drop of {size} points or more would have been flagged with 80% power)"


def model_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    """Each model's display name beside its full identity, as its runs recorded it."""
    return ["model", "identity"], [[name, identity] for identity, name in sorted(analysed.names.items())]


def category_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    """Per model, benchmark and category: the paired delta with its own 95% interval."""
    header = ["model", "benchmark", "category", "pairs", "acc original", "acc perturbed", "delta [95% CI]", ""]
    rows = [
        [
            analysed.names[r.model],
            r.benchmark,
            c.name,
            str(c.n),
            pct(c.acc_original),
            pct(c.acc_perturbed),
            f"{_signed(c.delta)} [{_signed(c.ci_low)}, {_signed(c.ci_high)}]",
            "interval excludes 0" if c.excludes_zero else "",
        ]
        for r in analysed.results
        for c in r.categories
    ]
    return header, rows


CATEGORY_LEGEND = (
    "Each category's delta (points) with its own 95% interval; an interval that excludes 0 is marked. With "
    "many categories some exclude 0 by chance alone: the verdict is the benchmark's, not a category's."
)


def _result_json(r: BenchmarkResult, display_name: str) -> dict:
    return {
        "model": r.model,
        "display_name": display_name,
        "benchmark": r.benchmark,
        "verdict": r.verdict,
        "n_pairs": r.comparison.n_pairs,
        "acc_original": r.comparison.acc_original,
        "acc_original_ci": list(r.ci_original),
        "acc_perturbed": r.comparison.acc_perturbed,
        "acc_perturbed_ci": list(r.ci_perturbed),
        "delta": r.comparison.delta,
        "delta_ci": [r.comparison.ci_low, r.comparison.ci_high],
        "mcnemar_p": r.comparison.mcnemar_p,
        "minimum_detectable_drop": r.minimum_detectable_drop,
        "p_adjusted": r.p_adjusted,
        "right_to_wrong": r.comparison.right_to_wrong,
        "wrong_to_right": r.comparison.wrong_to_right,
        "categories": [
            {
                "name": c.name,
                "n": c.n,
                "acc_original": c.acc_original,
                "acc_perturbed": c.acc_perturbed,
                "delta": c.delta,
                "delta_ci": [c.ci_low, c.ci_high],
            }
            for c in r.categories
        ],
        "group_metrics": r.group_metrics,
        "flagged": [
            {
                "item_id": f.original.item_id,
                "original_id": f.original.original_id,
                "gold_original": f.original.gold,
                "gold_perturbed": f.perturbed.gold,
                "response_original": f.original.response,
                "response_perturbed": f.perturbed.response,
            }
            for f in r.flagged
        ],
        "sources": r.sources,
        "host": r.host,
        "answer_matching": r.matching,
        "notes": r.notes,
        "accuracy_averaged_over": "categories" if r.averages_strata else "items",
        "interval_vs_test": r.interval_vs_test or None,
        "set": r.scored_set.as_dict() if r.scored_set else None,
    }


def _scanned_json(r: ScannedResult, alpha: float) -> dict:
    return {
        "model": r.model,
        "benchmark": r.benchmark,
        "n_items": r.n_items,
        "accuracy": r.accuracy,
        "n_unscanned": r.n_unscanned,
        "n_unjudged": r.n_unjudged,
        "judged": r.judged,
        "source": r.source,
        **{
            kind: {"rate": r.rates[kind], **asdict(subset), "verdict": subset.verdict(alpha)}
            for kind, subset in r.subsets.items()
            if kind == IMAGE_ONLY or r.judged
        },
    }


def to_json(analysed: Analysed) -> str:
    results, alpha = analysed.results, analysed.alpha
    payload = {
        "report_version": REPORT_VERSION,
        "lmms_contam_version": __version__,
        "alpha": alpha,
        "correction": "holm across each model's benchmarks",
        "summary": model_sentences(analysed),
        "results": [_result_json(r, analysed.names[r.model]) for r in results],
        "rates": [
            {
                "benchmark": r.benchmark,
                "images": r.images,
                "threshold": r.threshold,
                "image_only_rate": r.image_only_rate,
                "sweep": r.sweep,
                "recipe": r.recipe,
                "judge": r.judge,
                "source": r.source,
            }
            for r in analysed.rates
        ],
        "detectors": [
            {
                "model": d.model,
                "benchmark": d.benchmark,
                **d.signal.as_dict(),
                "flagged": d.signal.flagged(alpha),
                "source": d.source,
            }
            for d in analysed.detectors
        ],
        "scanned": [_scanned_json(r, alpha) for r in analysed.scanned],
    }
    return json.dumps(_without_nan(payload), indent=2, allow_nan=False) + "\n"


def _without_nan(value: object) -> object:
    """NaN is not JSON; an undefined figure becomes null."""
    if isinstance(value, dict):
        return {key: _without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nan(item) for item in value]
    return _number(value) if isinstance(value, float) else value


def _gap_cell(result: ScannedResult, alpha: float) -> str:
    kinds = (IMAGE_ONLY, IMAGE_TEXT) if result.judged else (IMAGE_ONLY,)
    return "; ".join(
        f"{FLAG_LABELS[kind]} {_signed(result.subsets[kind].gap)} "
        f"({result.subsets[kind].verdict(alpha).split(' (')[0]})"
        for kind in kinds
    )


def _signed(value: float) -> str:
    return "n/a" if _number(value) is None else f"{100 * value:+.1f}"


def leaderboard_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    """Per model: the perturbation delta per benchmark, then the contaminated - clean gap per scanned benchmark."""
    results, scanned = analysed.results, analysed.scanned
    perturbed = sorted({r.benchmark for r in results})
    gaps = sorted({r.benchmark for r in scanned})
    cell = {(r.model, r.benchmark): f"{100 * r.comparison.delta:+.1f} ({MARK[r.verdict]})" for r in results}
    cell |= {(r.model, f"{r.benchmark} scanned"): _gap_cell(r, analysed.alpha) for r in scanned}
    columns = [*perturbed, *(f"{b} scanned" for b in gaps)]
    models = sorted({r.model for r in results} | {r.model for r in scanned}, key=lambda m: analysed.names[m].lower())
    header = ["model", *(f"{b}: delta" for b in perturbed), *(f"{b}: flagged - clean" for b in gaps)]
    return header, [[analysed.names[m], *(cell.get((m, c), "-") for c in columns)] for m in models]


def scanned_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    """Per model, scanned benchmark and kind of flag: rate, accuracy on each side, gap, test, verdict."""
    rows = []
    for r in analysed.scanned:
        for kind, subset in r.subsets.items():
            if kind == IMAGE_TEXT and not r.judged:
                continue
            rows.append(
                [
                    analysed.names[r.model],
                    r.benchmark,
                    FLAG_LABELS[kind],
                    str(r.n_items),
                    pct(r.accuracy),
                    pct(r.rates[kind]),
                    f"{pct(subset.acc_flagged)} ({subset.n_flagged})",
                    f"{pct(subset.acc_clean)} ({subset.n_clean})",
                    f"{_signed(subset.gap)} [{_signed(subset.ci_low)}, {_signed(subset.ci_high)}]",
                    p_text(subset.p_value),
                    subset.verdict(analysed.alpha),
                ]
            )
    header = [
        "model",
        "benchmark",
        "flag",
        "items",
        "acc",
        "rate %",
        "acc flagged (n)",
        "acc clean (n)",
        "gap [95% CI]",
        "Fisher p",
        "verdict",
    ]
    return header, rows


def scanned_legend(analysed: Analysed) -> str:
    unscanned = sum(r.n_unscanned for r in analysed.scanned)
    unjudged = sum(r.n_unjudged for r in analysed.scanned)
    return (
        "From the *_scanned tasks: accuracy on the items a scan flagged as contaminated against the clean ones "
        "(acc: plain accuracy over all scored items). Gap = flagged - clean in points, 95% bootstrap CI (each "
        f"side resampled on its own), two-sided Fisher exact test (uncorrected), verdict at p < {analysed.alpha}; "
        f"no verdict with fewer than {MIN_SUBSET} items on a side. Left out of both sides: {unscanned} unscanned "
        f"item(s) (no single image), {unjudged} unjudged by the image-text judge."
    )


def detail_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    header = [
        "model",
        "benchmark",
        "host",
        "pairs",
        "acc original",
        "acc perturbed",
        "delta [95% CI]",
        "McNemar p",
        "p (Holm)",
        "detectable drop",
        "flagged",
        "verdict",
        "set",
    ]
    rows = [
        [
            analysed.names[r.model],
            r.benchmark,
            r.host,
            str(r.comparison.n_pairs),
            pct(r.comparison.acc_original),
            pct(r.comparison.acc_perturbed),
            delta_text(r),
            p_text(r.comparison.mcnemar_p),
            p_text(r.p_adjusted),
            "none" if r.minimum_detectable_drop is None else f"{100 * r.minimum_detectable_drop:.1f}",
            str(len(r.flagged)),
            MARK[r.verdict],
            r.scored_set.short() if r.scored_set else "unknown",
        ]
        for r in analysed.results
    ]
    return header, rows


MARKDOWN_SPECIAL = re.compile(r"([\\`*_<|~&#])")  # inside a table cell, after line breaks are joined
BLOCK_MARKER = re.compile(r"^(\d*)(>|[+-](?= |$)|(?<=\d)[.)](?= |$))")  # a quote or list marker opening a line


def printed(text: str) -> str:
    """The user's text as a page shows it: invisible characters dropped, any run of white space one space."""
    return " ".join("".join(ch for ch in str(text) if unicodedata.category(ch) != "Cf").split())


def markdown_text(text: str) -> str:
    """A cell's text as literal Markdown: model names and arguments are the user's, and a `|`, a link, an
    HTML tag, emphasis or a line break in them must not change the table or the page it is rendered into
    (a link needs `](`: escaping that keeps the report's own `[low, high]` intervals readable)."""
    escaped = MARKDOWN_SPECIAL.sub(r"\\\1", printed(text))
    return escaped.replace("](", "]\\(")


def markdown_item(text: str) -> str:
    """A list item of the user's text: as markdown_text, and a list or quote marker it begins with escaped (it
    would nest a list or a quote in the item)."""
    return "- " + BLOCK_MARKER.sub(r"\1\\\2", markdown_text(text))


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(markdown_text, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(markdown_text, row)) + " |" for row in rows]
    return "\n".join(lines)


def detector_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    """Per model and benchmark: the perturbation delta and verdict beside each peer detector's signal."""
    perturbation = {(r.model, r.benchmark): r for r in analysed.results}
    signals = {(d.model, d.benchmark, d.detector): d.signal for d in analysed.detectors}
    pairs = sorted({(d.model, d.benchmark) for d in analysed.detectors})
    rows = []
    for model, benchmark in pairs:
        result = perturbation.get((model, benchmark))
        delta = f"{100 * result.comparison.delta:+.1f} ({MARK[result.verdict]})" if result else "-"
        row = [analysed.names[model], benchmark, delta]
        for detector in DETECTORS.values():
            signal = signals.get((model, benchmark, detector.name))
            row.append(detector_cell(detector, signal, analysed.alpha) if signal else "-")
        rows.append(row)
    return ["model", "benchmark", "semantic perturbation", *(d.label for d in DETECTORS.values())], rows


def rate_rows(analysed: Analysed) -> tuple[list[str], list[list[str]]]:
    """Per scanned benchmark: image-only rate, and the judge's image-text rate where one was made."""
    rows = []
    for r in analysed.rates:
        judged = (r.judge or {}).get("judge")
        agreement = (judged or {}).get("agreement")
        if not judged:
            text_rate = "not judged"
        elif judged.get("complete") is False:
            text_rate = f"none: the judge's API calls failed ({'; '.join(judged['problems'])})"
        else:
            text_rate = (
                f"{pct(judged['image_text_rate'])} (up to {pct(judged['image_text_rate_upper'])}; "
                f"{judged['usage'][0]['model']})"
            )
        rows.append(
            [
                r.benchmark,
                str(r.images),
                f"{pct(r.image_only_rate)} (> {r.threshold})",
                text_rate,
                pct(r.judge["prefilter_rate"]) if r.judge else "-",
                str(judged["counts"].get("unjudged", 0)) if judged else "-",
                f"{agreement['agree']} of {agreement['judged_by_both']}" if agreement else "-",
            ]
        )
    header = [
        "benchmark",
        "images",
        "image-only rate % (similarity)",
        "image-text rate % (judge)",
        "n-gram pre-filter %",
        "unjudged",
        "judge agreement",
    ]
    return header, rows


RATES_LEGEND = (
    "Image-only: eval images with a corpus image above the similarity threshold. Image-text: samples whose "
    "matched captions give the answer away, by the LLM judge (the upper bound counts unjudged samples as "
    "answerable). Pre-filter: samples with a discriminative answer word in a matched caption."
)


def detector_cell(detector: Detector, signal: DetectorSignal, alpha: float) -> str:
    if math.isnan(signal.reference):  # no reference to measure against: the rate alone, and how to get one
        option = detector.baseline.option if detector.baseline else "a reference"
        return f"{100 * signal.score:.1f}% (no reference: {option}; n {signal.n_items})"
    against = signal.baseline or (detector.baseline.default if detector.baseline else "")
    against = f", vs {against}" if against else ""
    return (
        f"{100 * signal.signal:+.1f} ({'flagged' if signal.flagged(alpha) else 'not flagged'}, "
        f"p {p_text(signal.p_value)}, n {signal.n_items}{against})"
    )


def detector_legend(alpha: float) -> str:
    described = "; ".join(f"{d.label}: {d.description}" for d in DETECTORS.values())
    return (
        f"Signals in points. {described}. The order detectors flag a drop; text-only and masked option flag a gain "
        f"over chance, each when its p < {alpha} (exact McNemar for the order detectors, one-sided exact test "
        "against chance for the others; uncorrected). Where a text-only cell names a model (--text-only-baseline), "
        "the reference is that base LLM's text-only accuracy on the same items (exact McNemar), as MMStar defines "
        "multi-modal leakage, ML = max(0, signal); where a masked-option cell names one (--masked-option-reference), "
        "it is that clean model's rate of exact matches on the same items; where a CircularEval cell names one "
        "(--circular-reference), the signal is the drop beyond that clean model's drop on the same items. Masked "
        "option's chance is the rate a model that never saw an item reaches by construction, which only procedural "
        "benchmarks state; elsewhere the cell gives the rate alone. All run on the original versions of the items "
        "the perturbation delta uses."
    )


def set_sentences(results: list[BenchmarkResult]) -> list[str]:
    """Per benchmark, whether its set was verified, and what a negative delta means if it was not."""
    statuses = {r.benchmark: r.scored_set for r in results if r.scored_set}
    return [status.sentence() for _, status in sorted(statuses.items())]


def matching_sentences(analysed: Analysed) -> list[str]:
    """How each run's replies were judged right or wrong, with what its reader should know."""
    return [
        f"{analysed.names[r.model]}, {r.benchmark} ({r.host}): {'; '.join([r.matching, *r.notes])}"
        for r in analysed.results
    ]


def interval_sentences(analysed: Analysed) -> list[str]:
    """Where a delta's interval and its verdict disagree: which governs, and why."""
    return [
        f"{analysed.names[r.model]}, {r.benchmark}: {r.interval_vs_test}"
        for r in analysed.results
        if r.interval_vs_test
    ]


def to_markdown(analysed: Analysed) -> str:
    results, alpha = analysed.results, analysed.alpha
    parts = ["# Contamination report (lmms-contam)", ""]
    if results:
        parts += [*(markdown_item(line) for line in model_sentences(analysed)), ""]
        parts += [
            f"Semantic perturbation: accuracy in % as the host computes it; delta = perturbed - original on the same "
            f"items, 95% CI; exact McNemar test, Holm-corrected across each model's benchmarks; contaminated = "
            f"delta < 0 and p (Holm) < {alpha}. Detectable drop: the smallest drop in points the test flags with "
            f"80% power at that n and discordance, at alpha / the model's benchmarks (Holm's strictest step).",
            "",
        ]
    if results or analysed.scanned:
        parts += ["## Leaderboard", "", _table(*leaderboard_rows(analysed)), ""]
    if results:
        parts += ["## Details", "", _table(*detail_rows(analysed)), ""]
        parts += ["Sets scored:", "", *(markdown_item(line) for line in set_sentences(results)), ""]
        parts += ["Answers matched by:", "", *(markdown_item(line) for line in matching_sentences(analysed)), ""]
        if interval_sentences(analysed):
            parts += ["Interval and test:", "", *(markdown_item(line) for line in interval_sentences(analysed)), ""]
    if any(r.categories for r in results):
        parts += ["## Per-category deltas", "", CATEGORY_LEGEND, "", _table(*category_rows(analysed)), ""]
    if analysed.scanned:
        parts += [
            "## Contaminated vs clean items",
            "",
            scanned_legend(analysed),
            "",
            _table(*scanned_rows(analysed)),
            "",
        ]
    if analysed.detectors:
        parts += ["## Peer detectors", "", detector_legend(alpha), "", _table(*detector_rows(analysed)), ""]
    if analysed.rates:
        parts += ["## Contamination rates of the benchmarks", "", RATES_LEGEND, "", _table(*rate_rows(analysed)), ""]
    if analysed.names:
        parts += ["## Models", "", _table(*model_rows(analysed)), ""]
    return "\n".join(parts)
