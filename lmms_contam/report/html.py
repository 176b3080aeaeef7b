"""One self-contained HTML page: tables, plots as inline PNG, flagged items as image pairs.

Nothing on the page refers to the network: styles are inline and every image is a data: URI.
"""

from __future__ import annotations

import base64
import html
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmms_contam.report import evidence as evidence_mod  # noqa: E402
from lmms_contam.report.analysis import Analysed, BenchmarkResult  # noqa: E402
from lmms_contam.report.benchmark_rates import BenchmarkRates  # noqa: E402
from lmms_contam.report.matches import top_matches  # noqa: E402
from lmms_contam.report.render import (  # noqa: E402
    RATES_LEGEND,
    detail_rows,
    detector_legend,
    detector_rows,
    leaderboard_rows,
    rate_rows,
    scanned_legend,
    scanned_rows,
    set_sentences,
)

MAX_FLAGGED_SHOWN = 24
VERDICT_COLOUR = {"contaminated": "#c62828", "inconclusive": "#ef6c00", "no evidence": "#2e7d32"}
STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1300px}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f0f0f0}.verdict{font-weight:bold;color:#fff;padding:2px 6px;border-radius:3px}
.pair{display:flex;gap:16px;align-items:flex-start;border-top:1px solid #ddd;padding:12px 0}
.pair figure{margin:0;text-align:center}.pair img{max-width:256px;max-height:256px;display:block}
.note{color:#666;font-style:italic}pre{white-space:pre-wrap;margin:0}
"""


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def accuracy_plot(results: list[BenchmarkResult]) -> str:
    """Original vs perturbed accuracy with 95% CIs, one panel per benchmark, one pair of points per model."""
    benchmarks = sorted({r.benchmark for r in results})
    figure, axes = plt.subplots(1, len(benchmarks), figsize=(5 * len(benchmarks), 4), squeeze=False)
    for axis, benchmark in zip(axes[0], benchmarks, strict=True):
        rows = [r for r in results if r.benchmark == benchmark]
        for x, r in enumerate(rows):
            for offset, (value, (low, high), colour, label) in enumerate(
                [
                    (r.comparison.acc_original, r.ci_original, "#1565c0", "original"),
                    (r.comparison.acc_perturbed, r.ci_perturbed, "#e65100", "perturbed"),
                ]
            ):
                axis.errorbar(
                    x + (offset - 0.5) * 0.3,
                    100 * value,
                    yerr=[[100 * (value - low)], [100 * (high - value)]],
                    fmt="o",
                    color=colour,
                    capsize=4,
                    markersize=8,
                    label=label if x == 0 else None,
                )
        labels = [r.model.replace("$", r"\$") for r in rows]  # a `$` in model args is not mathtext
        axis.set_xticks(range(len(rows)), labels, rotation=20, ha="right", fontsize=8)
        axis.set_title(benchmark)
        axis.set_ylabel("accuracy (%)")
        axis.set_ylim(-5, 105)
        axis.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper right", ncol=2, fontsize=9)
    return _png(figure)


def category_plot(result: BenchmarkResult) -> str:
    names = [c.name for c in result.categories]
    figure, axis = plt.subplots(figsize=(7, 0.35 * len(names) + 1.2))
    deltas = [100 * c.delta for c in result.categories]
    axis.barh(names, deltas, color=["#c62828" if d < 0 else "#2e7d32" for d in deltas])
    axis.axvline(0, color="#333", linewidth=1)
    axis.set_xlabel("delta (perturbed - original), points")
    axis.set_title(f"{result.model}: {result.benchmark} per category".replace("$", r"\$"), fontsize=10)
    axis.tick_params(axis="y", labelsize=8)
    return _png(figure)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_verdict_badge(cell) if cell in VERDICT_COLOUR else html.escape(cell)}</td>" for cell in row)
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _verdict_badge(verdict: str) -> str:
    return f'<span class="verdict" style="background:{VERDICT_COLOUR[verdict]}">{html.escape(verdict)}</span>'


def _flagged_section(result: BenchmarkResult) -> str:
    shown = result.flagged[:MAX_FLAGGED_SHOWN]
    found, note = evidence_mod.collect(result.benchmark, {f.original.item_id for f in shown})
    parts = [f"<h3>{html.escape(result.model)}: {html.escape(result.benchmark)}: {len(result.flagged)} flagged</h3>"]
    if note:
        parts.append(f'<p class="note">{html.escape(note)}</p>')
    if len(result.flagged) > len(shown):
        parts.append(f'<p class="note">showing the first {len(shown)} of {len(result.flagged)}</p>')
    for item in shown:
        ev = found.get(item.original.item_id)
        images = (
            f'<figure><img alt="original" src="{ev.original_image}"><figcaption>original</figcaption></figure>'
            f'<figure><img alt="perturbed" src="{ev.perturbed_image}"><figcaption>perturbed</figcaption></figure>'
            if ev
            else ""
        )
        question = f"<pre>{html.escape(ev.question)}</pre>" if ev else ""
        parts.append(
            f'<div class="pair">{images}<div><b>{html.escape(item.original.item_id)}</b>{question}'
            f"<p>gold: original <b>{html.escape(item.original.gold)}</b>, perturbed "
            f"<b>{html.escape(item.perturbed.gold)}</b></p>"
            f"<p>model on original: <code>{html.escape(item.original.response)}</code><br>"
            f"model on perturbed: <code>{html.escape(item.perturbed.response)}</code></p></div></div>"
        )
    return "".join(parts)


def _matches_section(rates: BenchmarkRates) -> str:
    pairs, notes = top_matches(rates)
    if not pairs:
        return ""
    parts = [f"<h3>{html.escape(rates.benchmark)}: closest corpus matches above {rates.threshold}</h3>"]
    parts += [f'<p class="note">{html.escape(note)}</p>' for note in notes]
    for pair in pairs:
        images = "".join(
            f'<figure><img alt="{label}" src="{uri}"><figcaption>{label}</figcaption></figure>'
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


def to_html(analysed: Analysed) -> str:
    results, alpha = analysed.results, analysed.alpha
    sections = [
        "<h1>Contamination report</h1>",
        f"<p>Semantic perturbation: delta = accuracy on counterfactuals - accuracy on originals, same items; "
        f"95% stratified CI; exact McNemar test, Holm-corrected across each model's benchmarks; "
        f"contaminated = delta &lt; 0 and p (Holm) &lt; {alpha}.</p>",
    ]
    if results or analysed.scanned:
        sections += ["<h2>Leaderboard (points, verdict)</h2>", _table(*leaderboard_rows(analysed))]
    if results:
        sections += [
            "<h2>Details</h2>",
            _table(*detail_rows(results)),
            "<p>Sets scored:</p><ul>",
            *(f"<li>{html.escape(line)}</li>" for line in set_sentences(results)),
            "</ul>",
        ]
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
    if results:
        sections += [
            "<h2>Accuracy, original vs perturbed (95% CI)</h2>",
            f'<img alt="accuracy plot" src="{accuracy_plot(results)}">',
        ]
    with_categories = [r for r in results if r.categories]
    if with_categories:
        sections.append("<h2>Per-category deltas</h2>")
        sections += [f'<img alt="category deltas" src="{category_plot(r)}">' for r in with_categories]
    for r in results:
        if r.group_metrics:
            rows = [
                [v, *(f"{100 * m[k]:.1f}" for k in ("Acc", "Q_Acc", "I_Acc", "G_Acc"))]
                for v, m in r.group_metrics.items()
            ]
            sections.append(f"<h3>{html.escape(r.model)}: {r.benchmark} group metrics (%)</h3>")
            sections.append(_table(["version", "Acc", "Q_Acc", "I_Acc", "G_Acc"], rows))
    if any(r.flagged for r in results):
        sections.append("<h2>Flagged items (right on the original, wrong on its counterfactual)</h2>")
        sections += [_flagged_section(r) for r in results if r.flagged]
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'\">"
        f"<title>lmms-contam report</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
