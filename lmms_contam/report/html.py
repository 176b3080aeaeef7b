"""One self-contained HTML page: tables, plots as inline PNG, flagged items as image pairs.

Nothing on the page refers to the network: styles are inline and every image is a data: URI.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmms_contam.report import evidence as evidence_mod  # noqa: E402
from lmms_contam.report.analysis import Analysed, BenchmarkResult  # noqa: E402
from lmms_contam.report.benchmark_rates import BenchmarkRates  # noqa: E402
from lmms_contam.report.matches import top_matches  # noqa: E402
from lmms_contam.report.render import (  # noqa: E402
    CATEGORY_LEGEND,
    RATES_LEGEND,
    category_rows,
    detail_rows,
    detector_legend,
    detector_rows,
    interval_sentences,
    leaderboard_rows,
    model_rows,
    model_sentences,
    rate_rows,
    scanned_legend,
    scanned_rows,
    set_sentences,
)

MAX_FLAGGED_SHOWN = 24
PAGE_PAIRS = 120  # image pairs on one page: each image is full-size (up to 1,280 px), so the page stays tens of MB
VERDICT_COLOUR = {"contaminated": "#c62828", "inconclusive": "#ef6c00", "no evidence": "#2e7d32"}
STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1300px}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f0f0f0}.verdict{font-weight:bold;color:#fff;padding:2px 6px;border-radius:3px}
.summary{font-size:1.1em;line-height:1.5}.summary li{margin:4px 0}
.pair{display:flex;gap:16px;align-items:flex-start;border-top:1px solid #ddd;padding:12px 0}
.pair figure{margin:0;text-align:center}.pair img{width:360px;height:auto;display:block;cursor:zoom-in}
.zoom:target{position:fixed;inset:0;display:flex;align-items:center;justify-content:center;z-index:10;
background:rgba(0,0,0,.85)}.zoom:target img{width:auto;height:auto;max-width:98vw;max-height:98vh}
.close{display:none}.zoom:target+.close{display:block;position:fixed;inset:0;z-index:11;cursor:zoom-out}
.note{color:#666;font-style:italic}pre{white-space:pre-wrap;margin:0}
"""


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


LABEL_POINTS = 9  # every label of the plots, at the page's scale (figures are at most PAGE_INCHES wide)
PAGE_INCHES = 12.5  # 1,250 px at 100 dpi: within the page's 1,300 px, so nothing is scaled down
PANELS_PER_ROW = 3


def _plain(text: str) -> str:
    """A label as written: a `$` in a model's name or arguments is not the start of mathtext."""
    return text.replace("$", r"\$")


def accuracy_figure(results: list[BenchmarkResult], names: dict[str, str]):
    """Original vs perturbed accuracy with 95% CIs: a panel per benchmark, a row per model (its display
    name on the axis), so 10 models and 9 benchmarks stay readable."""
    benchmarks = sorted({r.benchmark for r in results})
    models = sorted({r.model for r in results}, key=lambda m: names[m].lower())
    columns = min(PANELS_PER_ROW, len(benchmarks))
    rows = -(-len(benchmarks) // columns)
    height = 0.32 * len(models) + 1.3
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(PAGE_INCHES * max(columns, 2) / PANELS_PER_ROW, height * rows),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for axis in axes.flat[len(benchmarks) :]:
        axis.set_visible(False)
    for axis, benchmark in zip(axes.flat, benchmarks, strict=False):
        by_model = {r.model: r for r in results if r.benchmark == benchmark}
        for y, model in enumerate(models):
            r = by_model.get(model)
            if r is None:
                continue
            for offset, (value, (low, high), colour, label) in enumerate(
                [
                    (r.comparison.acc_original, r.ci_original, "#1565c0", "original"),
                    (r.comparison.acc_perturbed, r.ci_perturbed, "#e65100", "perturbed"),
                ]
            ):
                axis.errorbar(
                    100 * value,
                    y + (offset - 0.5) * 0.3,
                    xerr=[[100 * (value - low)], [100 * (high - value)]],
                    fmt="o",
                    color=colour,
                    capsize=3,
                    markersize=5,
                    label=label if y == 0 else None,
                )
        axis.set_yticks(range(len(models)), [_plain(names[m]) for m in models], fontsize=LABEL_POINTS)
        axis.set_ylim(len(models) - 0.5, -0.5)
        axis.set_xlim(-2, 102)
        axis.set_title(benchmark, fontsize=LABEL_POINTS + 1)
        axis.set_xlabel("accuracy (%)", fontsize=LABEL_POINTS)
        axis.tick_params(axis="x", labelsize=LABEL_POINTS)
        axis.grid(axis="x", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside upper right", ncol=2, fontsize=LABEL_POINTS)
    return figure


def forest_axis_limits(results: list[BenchmarkResult]) -> tuple[float, float]:
    """One axis for every forest plot of the page, in points, so a +2 and a -30 look as different as they are."""
    ends = [100 * value for r in results for c in r.categories for value in (c.ci_low, c.ci_high)]
    ends += [100 * value for r in results if r.categories for value in (r.comparison.ci_low, r.comparison.ci_high)]
    reach = max([10.0, *(abs(value) for value in ends if not math.isnan(value))])
    reach = min(100.0, 5 * -(-reach // 5))
    return -reach - 2, reach + 2


def forest_figure(result: BenchmarkResult, names: dict[str, str], limits: tuple[float, float]):
    """Each category's delta with its 95% interval, the overall delta and its interval at the bottom;
    categories whose interval excludes 0 in colour (red below, green above), the others grey."""
    categories = result.categories
    figure, axis = plt.subplots(figsize=(8, 0.3 * len(categories) + 1.6), layout="constrained")
    for y, c in enumerate(categories):
        colour = ("#c62828" if c.ci_high < 0 else "#2e7d32") if c.excludes_zero else "#9e9e9e"
        axis.errorbar(
            100 * c.delta,
            y,
            xerr=[[100 * (c.delta - c.ci_low)], [100 * (c.ci_high - c.delta)]],
            fmt="o",
            color=colour,
            capsize=3,
            markersize=5,
        )
    overall = result.comparison
    y = len(categories) + 0.5
    axis.errorbar(
        100 * overall.delta,
        y,
        xerr=[[100 * (overall.delta - overall.ci_low)], [100 * (overall.ci_high - overall.delta)]],
        fmt="D",
        color="#222",
        capsize=4,
        markersize=7,
    )
    axis.axvline(0, color="#333", linewidth=1)
    axis.axvline(100 * overall.delta, color="#222", linewidth=1, linestyle="--", alpha=0.5)
    labels = [f"{c.name} (n {c.n})" for c in categories] + [f"overall (n {overall.n_pairs})"]
    axis.set_yticks([*range(len(categories)), y], [_plain(label) for label in labels])
    axis.tick_params(labelsize=LABEL_POINTS)
    axis.set_ylim(y + 0.7, -0.7)
    axis.set_xlim(*limits)
    axis.set_xlabel("delta (perturbed - original), points, 95% interval", fontsize=LABEL_POINTS)
    axis.set_title(_plain(f"{names[result.model]}: {result.benchmark}"), fontsize=LABEL_POINTS + 1)
    axis.grid(axis="x", alpha=0.3)
    return figure


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Verdicts as coloured badges in the verdict column only: a model or benchmark named like one stays text."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    badge = [name == "verdict" for name in header]
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{_verdict_badge(cell) if is_verdict and cell in VERDICT_COLOUR else html.escape(cell)}</td>"
            for cell, is_verdict in zip(row, badge, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _verdict_badge(verdict: str) -> str:
    return f'<span class="verdict" style="background:{VERDICT_COLOUR[verdict]}">{html.escape(verdict)}</span>'


def _zoomable(label: str, uri: str, anchor: str) -> str:
    """An image that opens at its full size over the page on a click, and closes on another: a link to its
    own anchor, which CSS's :target enlarges (no script; page.html#<anchor> opens it too)."""
    return (
        f'<figure><a class="zoom" id="{anchor}" href="#{anchor}"><img alt="{html.escape(label)}" src="{uri}"></a>'
        f'<a class="close" href="#_" aria-label="close"></a><figcaption>{html.escape(label)}</figcaption></figure>'
    )


def _anchor(*parts: str) -> str:
    """A stable id for an image on the page, safe in a URL fragment whatever the model or item is called."""
    return "img-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def _flagged_section(result: BenchmarkResult, name: str, room: int) -> tuple[str, int]:
    """The first flagged items of one model and benchmark as image pairs, at most `room` of them, and how
    many it shows."""
    shown = result.flagged[: min(MAX_FLAGGED_SHOWN, room)]
    found, note = evidence_mod.collect(result.benchmark, {f.original.item_id for f in shown})
    parts = [f"<h3>{html.escape(name)}: {html.escape(result.benchmark)}: {len(result.flagged)} flagged</h3>"]
    if note:
        parts.append(f'<p class="note">{html.escape(note)}</p>')
    if len(result.flagged) > len(shown):
        parts.append(
            f'<p class="note">showing the first {len(shown)} of {len(result.flagged)} (at most {MAX_FLAGGED_SHOWN} '
            f"per model and benchmark and {PAGE_PAIRS} on the page, whose images are full-size; every flagged "
            "item is in the JSON)</p>"
        )
    for item in shown:
        ev = found.get(item.original.item_id)
        key = (name, result.benchmark, item.original.item_id)
        images = (
            _zoomable("original", ev.original_image, _anchor(*key, "original"))
            + _zoomable("perturbed", ev.perturbed_image, _anchor(*key, "perturbed"))
            if ev
            else ""
        )
        question = f"<pre>{html.escape(ev.question)}</pre>" if ev else ""
        parts.append(
            f'<div class="pair">{images}<div><b>{html.escape(name)}</b>: {html.escape(result.benchmark)} item '
            f"<b>{html.escape(item.original.item_id)}</b>{question}"
            f"<p>gold: original <b>{html.escape(item.original.gold)}</b>, perturbed "
            f"<b>{html.escape(item.perturbed.gold)}</b></p>"
            f"<p>model on original: <code>{html.escape(item.original.response)}</code><br>"
            f"model on perturbed: <code>{html.escape(item.perturbed.response)}</code></p></div></div>"
        )
    return "".join(parts), len(shown)


def _matches_section(rates: BenchmarkRates) -> str:
    pairs, notes = top_matches(rates)
    if not pairs:
        return ""
    parts = [f"<h3>{html.escape(rates.benchmark)}: closest corpus matches above {rates.threshold}</h3>"]
    parts += [f'<p class="note">{html.escape(note)}</p>' for note in notes]
    for pair in pairs:
        images = "".join(
            _zoomable(label, uri, _anchor(rates.benchmark, pair.eval_id, label))
            if uri
            else f"<figure><figcaption>{label}: no local image</figcaption></figure>"
            for label, uri in (("eval", pair.eval_image), ("corpus", pair.corpus_image))
        )
        parts.append(
            f'<div class="pair">{images}<div><b>{html.escape(pair.eval_id)}</b>'
            f"<p>similarity {pair.similarity:.3f}; {pair.matches_above} corpus match(es) above the threshold</p>"
            f"<p>caption: {html.escape(pair.caption) or '<i>none</i>'}<br>url: {html.escape(pair.url) or '-'}</p>"
            "</div></div>"
        )
    return "".join(parts)


def _perturbation_sections(analysed: Analysed) -> list[str]:
    """The verdicts: summary sentences, leaderboard, accuracy plot, details and what a reader should know."""
    results, alpha, names = analysed.results, analysed.alpha, analysed.names
    sections: list[str] = []
    if results:
        sections += [
            '<ul class="summary">',
            *(f"<li>{html.escape(line)}</li>" for line in model_sentences(analysed)),
            "</ul>",
            f"<p>Semantic perturbation: delta = accuracy on counterfactuals - accuracy on originals, same items; "
            f"95% CI; exact McNemar test, Holm-corrected across each model's benchmarks; "
            f"contaminated = delta &lt; 0 and p (Holm) &lt; {alpha}.</p>",
        ]
    if results or analysed.scanned:
        sections += ["<h2>Leaderboard (points, verdict)</h2>", _table(*leaderboard_rows(analysed))]
    if results:
        sections += [
            "<h2>Accuracy, original vs perturbed (95% CI)</h2>",
            f'<img alt="accuracy plot" src="{_png(accuracy_figure(results, names))}">',
            "<h2>Details</h2>",
            _table(*detail_rows(analysed)),
            "<p>Sets scored:</p><ul>",
            *(f"<li>{html.escape(line)}</li>" for line in set_sentences(results)),
            "</ul>",
        ]
        if interval_sentences(analysed):
            sections += [
                "<p>Interval and test:</p><ul>",
                *(f"<li>{html.escape(line)}</li>" for line in interval_sentences(analysed)),
                "</ul>",
            ]
    return sections


def _category_sections(analysed: Analysed) -> list[str]:
    results, names = analysed.results, analysed.names
    sections: list[str] = []
    with_categories = [r for r in results if r.categories]
    if with_categories:
        limits = forest_axis_limits(with_categories)
        sections += ["<h2>Per-category deltas</h2>", f"<p>{html.escape(CATEGORY_LEGEND)}</p>"]
        sections += [
            f'<img alt="per-category deltas of {html.escape(names[r.model])} on {html.escape(r.benchmark)}" '
            f'src="{_png(forest_figure(r, names, limits))}">'
            for r in with_categories
        ]
        sections.append(_table(*category_rows(analysed)))
    return sections


def _other_method_sections(analysed: Analysed) -> list[str]:
    """The corpus-side figures and the peer detectors."""
    alpha = analysed.alpha
    sections: list[str] = []
    if analysed.scanned:
        sections += [
            "<h2>Contaminated vs clean items</h2>",
            f"<p>{html.escape(scanned_legend(analysed))}</p>",
            _table(*scanned_rows(analysed)),
        ]
    if analysed.detectors:
        sections += [
            "<h2>Peer detectors</h2>",
            f"<p>{html.escape(detector_legend(alpha))}</p>",
            _table(*detector_rows(analysed)),
        ]
    if analysed.rates:
        sections += [
            "<h2>Contamination rates of the benchmarks</h2>",
            f"<p>{html.escape(RATES_LEGEND)}</p>",
            _table(*rate_rows(analysed)),
        ]
        sections += [_matches_section(rates) for rates in analysed.rates]
    return sections


def _evidence_sections(analysed: Analysed) -> list[str]:
    """NaturalBench's group metrics and the flagged items' image pairs."""
    results, names = analysed.results, analysed.names
    sections: list[str] = []
    for r in results:
        if r.group_metrics:
            rows = [
                [v, *(f"{100 * m[k]:.1f}" for k in ("Acc", "Q_Acc", "I_Acc", "G_Acc"))]
                for v, m in r.group_metrics.items()
            ]
            sections.append(f"<h3>{html.escape(names[r.model])}: {r.benchmark} group metrics (%)</h3>")
            sections.append(_table(["version", "Acc", "Q_Acc", "I_Acc", "G_Acc"], rows))
    if any(r.flagged for r in results):
        sections.append(
            "<h2>Flagged items (right on the original, wrong on its counterfactual)</h2>"
            '<p class="note">Click an image to see it at full size; click again to close it.</p>'
        )
        room = PAGE_PAIRS
        for r in (r for r in results if r.flagged):
            section, shown = _flagged_section(r, names[r.model], room)
            sections.append(section)
            room -= shown
    return sections


def to_html(analysed: Analysed) -> str:
    sections = ["<h1>Contamination report</h1>", *_perturbation_sections(analysed), *_category_sections(analysed)]
    sections += [*_other_method_sections(analysed), *_evidence_sections(analysed)]
    if analysed.names:
        sections += ["<h2>Models</h2>", _table(*model_rows(analysed))]
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'\">"
        f"<title>lmms-contam report</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
