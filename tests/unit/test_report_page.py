"""The report at a glance: short model names, one sentence per model, intervals wherever a difference is
drawn, and plots whose labels stay readable at 10 models x 9 benchmarks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lmms_contam.report import analysis, html, render
from lmms_contam.report.inputs import ModelBenchmark, ScoredItem
from lmms_contam.report.names import display_names

BENCHMARKS = ("ai2d", "mmbench", "mme", "mmmu", "mmstar", "naturalbench", "realworldqa", "scienceqa", "seedbench")


def test_display_names_are_the_shortest_unique_tail_of_the_weights():
    identities = [
        "llava_hf (pretrained=/scratch/ckpt/run7/final,device=cuda)",
        "llava_hf (pretrained=/scratch/ckpt/run8/final)",
        "qwen2_vl (pretrained=Qwen/Qwen2-VL-7B-Instruct)",
        "llava_hf (pretrained=/home/a/clean/)",  # a trailing slash
        "GPT4o (VLMEvalKit)",
        "contam_test_oracle",
        "contam_test_oracle (VLMEvalKit)",  # the same model in both hosts
        "llava_hf (pretrained=/m/same,dtype=float16)",
        "llava_hf (pretrained=/m/same,dtype=bfloat16)",  # nothing in the weights tells these two apart
        "internvl (model_path=/weights/InternVL2-8B|$x)",  # characters that mean something to Markdown and TeX
        "/runs/demo/models/seed0/full-e30",  # a run named by its weights' path alone (lmms-eval's model_name)
    ]
    names = display_names(identities)
    assert names["llava_hf (pretrained=/scratch/ckpt/run7/final,device=cuda)"] == "run7/final"
    assert names["llava_hf (pretrained=/scratch/ckpt/run8/final)"] == "run8/final"
    assert names["qwen2_vl (pretrained=Qwen/Qwen2-VL-7B-Instruct)"] == "Qwen2-VL-7B-Instruct"
    assert names["llava_hf (pretrained=/home/a/clean/)"] == "clean"
    assert names["GPT4o (VLMEvalKit)"] == "GPT4o"
    assert names["internvl (model_path=/weights/InternVL2-8B|$x)"] == "InternVL2-8B|$x"
    assert names["/runs/demo/models/seed0/full-e30"] == "full-e30"
    # Where nothing shorter is unique, the full identity.
    assert names["llava_hf (pretrained=/m/same,dtype=float16)"] == "llava_hf (pretrained=/m/same,dtype=float16)"
    assert len(set(names.values())) == len(identities)
    assert display_names(list(reversed(identities))) == names  # the order they are met in changes nothing


def scored(model: str, benchmark: str, drop: float, n: int = 60, seed: int = 0) -> ModelBenchmark:
    """A model right on 80% of the originals, losing `drop` of them on the counterfactuals; 3 categories."""
    rng = np.random.default_rng(seed)
    entry = ModelBenchmark(model=model, benchmark=benchmark)
    for i in range(n):
        right = rng.random() < 0.8
        kept = right and rng.random() >= drop or (not right and rng.random() < 0.1)
        for variant, correct in (("original", right), ("perturbed", kept)):
            entry.items[f"{i}"][variant] = ScoredItem(
                benchmark=benchmark,
                item_id=f"{i}",
                original_id=f"{i}",
                variant=variant,
                correct=int(correct),
                n_options=4,
                stratum=("coarse perception", "math", "science & technology")[i % 3],
            )
    return entry


def analysed_models(models: list[str], benchmarks=BENCHMARKS, dropping: dict | None = None) -> analysis.Analysed:
    dropping = dropping or {}
    results = [
        analysis.analyse(scored(m, b, dropping.get((m, b), 0.0), seed=i))
        for i, (m, b) in enumerate(itertools.product(models, benchmarks))
    ]
    return analysis.Analysed(results=analysis.decide(results), detectors=[], alpha=0.05)


def test_one_sentence_per_model_says_who_is_contaminated_on_what():
    clean, leaky = "llava_hf (pretrained=/ckpt/clean)", "llava_hf (pretrained=/ckpt/leaky)"
    analysed = analysed_models([clean, leaky], dropping={(leaky, "mmstar"): 0.9})
    sentences = render.model_sentences(analysed)
    assert len(sentences) == 2
    leaky_sentence = next(s for s in sentences if s.startswith("leaky: "))
    mmstar = next(r for r in analysed.results if r.model == leaky and r.benchmark == "mmstar")
    assert mmstar.verdict == analysis.CONTAMINATED
    assert f"contaminated on mmstar (delta {100 * mmstar.comparison.delta:+.1f} points, p " in leaky_sentence
    others = [r for r in analysed.results if r.model == leaky and r.verdict != analysis.CONTAMINATED]
    assert all(r.verdict == analysis.NO_EVIDENCE for r in others)
    # Beside "no evidence": how large a drop it could have missed, from each benchmark's n and discordance.
    drops = sorted(100 * r.minimum_detectable_drop for r in others)
    assert 0 < drops[0] <= drops[-1] < 100
    size = f"{drops[0]:.1f}" if f"{drops[0]:.1f}" == f"{drops[-1]:.1f}" else f"{drops[0]:.1f}-{drops[-1]:.1f}"
    assert leaky_sentence.endswith(
        f"no evidence on the other {len(others)} benchmarks (a drop of {size} points or more would have been "
        "flagged with 80% power)."
    )
    assert next(s for s in sentences if s.startswith("clean: ")).count("contaminated") == 0
    markdown = render.to_markdown(analysed)
    assert markdown.index("leaky: contaminated on mmstar") < markdown.index("## Leaderboard")
    assert "| leaky |" in markdown and "/ckpt/leaky" not in markdown.split("## Models")[0]  # full identity at the end


def test_categories_carry_intervals_and_the_forest_plots_share_one_axis():
    leaky = "leaky (pretrained=/ckpt/leaky)"
    analysed = analysed_models(["clean (pretrained=/ckpt/clean)", leaky], ("mmstar",), {(leaky, "mmstar"): 0.9})
    categories = {r.model: r.categories for r in analysed.results}
    assert all(c.ci_low <= c.delta <= c.ci_high for cs in categories.values() for c in cs)
    assert all(c.excludes_zero and c.ci_high < 0 for c in categories[leaky])  # 90% of the right answers lost
    assert not any(c.excludes_zero for c in categories["clean (pretrained=/ckpt/clean)"])
    limits = html.forest_axis_limits(analysed.results)
    assert limits[0] <= 100 * min(c.ci_low for c in categories[leaky]) and limits[1] >= -limits[0] - 1e-9
    for result in analysed.results:
        figure = html.forest_figure(result, analysed.names, limits)
        axis = figure.axes[0]
        assert axis.get_xlim() == pytest.approx(limits)
        labels = [label.get_text() for label in axis.get_yticklabels()]
        assert labels[-1].startswith("overall (n 60)") and len(labels) == len(result.categories) + 1
        html.plt.close(figure)
    rows = render.category_rows(analysed)[1]
    assert len(rows) == 6 and sum(row[-1] == "interval excludes 0" for row in rows) == 3


def _overlaps(boxes) -> bool:
    return any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def test_the_accuracy_plot_stays_readable_with_10_models_and_9_benchmarks():
    models = [f"llava_hf (pretrained=/scratch/experiments/run{i}/checkpoint-final)" for i in range(10)]
    analysed = analysed_models(models)
    figure = html.accuracy_figure(analysed.results, analysed.names)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    width, _ = figure.get_size_inches() * figure.dpi
    assert width <= 1300  # shown at its own size on the 1,300 px page, not scaled down
    panels = [axis for axis in figure.axes if axis.get_visible()]
    assert len(panels) == 9
    for axis in panels:
        ticks = [label for label in axis.get_yticklabels() if label.get_visible() and label.get_text()]
        if ticks:  # the panels of a row share their y labels
            assert [t.get_text() for t in ticks] == [f"run{i}/checkpoint-final" for i in range(10)]
            assert not _overlaps([t.get_window_extent(renderer) for t in ticks])
            assert min(t.get_fontsize() for t in ticks) >= 8
        assert not _overlaps([t.get_window_extent(renderer) for t in axis.get_xticklabels() if t.get_text()])
    # No panel's labels run into another panel.
    extents = [axis.get_tightbbox(renderer) for axis in panels]
    assert not _overlaps(extents)
    html.plt.close(figure)


def test_a_page_shows_a_bounded_number_of_full_size_image_pairs():
    """Each image is stored at full size, so many models flagging many items on many benchmarks must not make
    a page of gigabytes: at most PAGE_PAIRS pairs, each section saying how many it shows of how many (twelve
    sections of up to MAX_FLAGGED_SHOWN pairs hold more than twice the page's budget)."""
    toys = tuple(f"toybench{i}" for i in range(4))  # no set resolves for them: the pairs come without images
    models = [f"m (pretrained=/ckpt/model{i})" for i in range(3)]
    assert len(toys) * len(models) * html.MAX_FLAGGED_SHOWN > 2 * html.PAGE_PAIRS
    analysed = analysed_models(models, toys, {(m, b): 0.9 for m in models for b in toys})
    flagged = sum(len(r.flagged) for r in analysed.results)
    assert flagged > html.PAGE_PAIRS
    page = html.to_html(analysed)
    assert page.count('<div class="pair">') == html.PAGE_PAIRS
    cut = [r for r in analysed.results if len(r.flagged) > html.MAX_FLAGGED_SHOWN]
    assert cut and f"showing the first {html.MAX_FLAGGED_SHOWN} of {len(cut[0].flagged)}" in page
    assert page.count("showing the first 0 of") > 0  # sections past the budget name their items' count only


def _paired(model: str, benchmark: str, pairs: list[tuple[int, int]]) -> ModelBenchmark:
    entry = ModelBenchmark(model=model, benchmark=benchmark)
    for i, versions in enumerate(pairs):
        for variant, correct in zip(("original", "perturbed"), versions, strict=True):
            entry.items[f"{i}"][variant] = ScoredItem(benchmark=benchmark, item_id=f"{i}", original_id=f"{i}",
                                                      variant=variant, correct=correct, n_options=4)  # fmt: skip
    return entry


def test_where_interval_and_verdict_disagree_one_line_says_the_test_governs_and_why():
    """5 of 20 right answers lost, none gained: the interval excludes 0, the exact test's p is 0.0625. Two
    benchmarks each with p near 0.03: Holm's correction makes them inconclusive while their intervals exclude 0.
    A model whose interval and verdict agree gets no line."""
    lost = [(1, 0)] * 5 + [(1, 1)] * 15
    holm = [(1, 0)] * 8 + [(0, 1)] * 1 + [(1, 1)] * 31  # exact p 0.039 alone
    results = analysis.decide([
        analysis.analyse(_paired("a", "mmstar", lost)),
        analysis.analyse(_paired("b", "mmstar", holm)),
        analysis.analyse(_paired("b", "seedbench", holm)),
        analysis.analyse(_paired("c", "mmstar", [(1, 0)] * 30 + [(1, 1)] * 10)),
    ])  # fmt: skip
    line = {(r.model, r.benchmark): r.interval_vs_test for r in results}
    a = next(r for r in results if r.model == "a")
    assert a.verdict == analysis.INCONCLUSIVE and a.comparison.ci_high < 0
    assert line[("a", "mmstar")].startswith("The delta's 95% interval [-")
    assert "excludes 0, but the verdict is inconclusive: the exact McNemar test governs" in line[("a", "mmstar")]
    assert "exact on the 5 pairs answered differently" in line[("a", "mmstar")]
    for benchmark in ("mmstar", "seedbench"):
        assert "corrected for this model's 2 benchmarks" in line[("b", benchmark)] and "Holm" in line[("b", benchmark)]
    assert line[("c", "mmstar")] == ""  # contaminated, and its interval excludes 0
    analysed = analysis.Analysed(results=results, detectors=[], alpha=0.05)
    markdown = render.to_markdown(analysed)
    assert "Interval and test:" in markdown and markdown.count("the exact McNemar test governs") == 3
    assert "Interval and test" in html.to_html(analysed)
