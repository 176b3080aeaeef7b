"""Read, analyse, render, then write: every output is rendered before any file is touched, and the
files appear together or not at all."""

from __future__ import annotations

from pathlib import Path

from lmms_contam.atomic import atomic_paths
from lmms_contam.report import analysis, benchmark_rates, inputs, render, set_join
from lmms_contam.report.set_status import set_status


def _one_run_each(loaded: inputs.Loaded) -> None:
    """Two runs under one model's name (two hosts', or a name made to match another's) would be merged into one
    row, one of them lost and the correction across benchmarks miscounted; two names that print alike would be
    two rows no reader can tell apart: both refused, naming both."""
    shown: dict[str, str] = {}
    for model in sorted({e.model for e in loaded.benchmarks} | {r.model for r in loaded.detectors}):
        other = shown.setdefault(render.printed(model), model)
        if other != model:
            raise inputs.ReportInputError(f"models {other!r} and {model!r} print as one name; rename one")
    seen: dict[tuple[str, ...], str] = {}
    runs = [((e.model, e.benchmark), ", ".join(sorted(set(e.sources.values())))) for e in loaded.benchmarks]
    runs += [((r.model, r.benchmark, r.detector), r.source) for r in loaded.detectors]
    for key, source in runs:
        if key in seen:
            raise inputs.ReportInputError(
                f"{key[0]}: two runs of {' '.join(key[1:])} under this model name ({seen[key]} and {source}); "
                "report them apart, or rename one"
            )
        seen[key] = source


def build(
    loaded: inputs.Loaded,
    *,
    alpha: float = 0.05,
    markdown: str | Path | None = None,
    json_path: str | Path | None = None,
    html_path: str | Path | None = None,
    scans: str | Path | None = None,
    baselines: dict[tuple[str, str], inputs.DetectorRun] | None = None,
) -> tuple[analysis.Analysed, str]:
    """Return the analysis and the Markdown text; write the requested files, all or none. `loaded` comes
    from the hosts' readers (lmms_contam.hosts.read_runs), `baselines` are reference models' detector runs
    (inputs.baseline_runs)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not (loaded.benchmarks or loaded.detectors or loaded.scanned) and scans is None:
        raise inputs.ReportInputError("nothing to report: give lmms-eval or VLMEvalKit output folders, or --scans")
    _one_run_each(loaded)
    baselines = baselines or {}
    analysed = analysis.Analysed(
        results=analysis.decide([analysis.analyse(entry) for entry in loaded.benchmarks], alpha),
        detectors=[analysis.analyse_detector(run, baselines) for run in loaded.detectors],
        alpha=alpha,
        rates=benchmark_rates.load_benchmark_rates(scans) if scans is not None else [],
        scanned=[analysis.analyse_scanned(run) for run in loaded.scanned],
    )
    # the set each result was scored on, as its records name it; each is looked up once
    scored = {(entry.model, entry.benchmark): (entry.benchmark, entry.set_manifest) for entry in loaded.benchmarks}
    statuses = {key: set_status(*key) for key in set(scored.values())}
    set_join.join_all(loaded)
    for result in analysed.results:
        result.scored_set = statuses[scored[result.model, result.benchmark]]
    text = render.to_markdown(analysed)
    outputs: dict[Path, str] = {}
    if markdown:
        outputs[Path(markdown)] = text
    if json_path:
        outputs[Path(json_path)] = render.to_json(analysed)
    if html_path:
        from lmms_contam.report.html import to_html  # matplotlib only when a page is asked for

        outputs[Path(html_path)] = to_html(analysed)
    with atomic_paths(outputs) as temps:
        for tmp, content in zip(temps, outputs.values(), strict=True):
            tmp.write_text(content, encoding="utf-8")
    return analysed, text
