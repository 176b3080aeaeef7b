"""`lmms-contam report`: verdicts from lmms-eval outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmms_contam.commands.common import stop


def _set_files() -> dict[Path, str]:
    """Every file of the perturbed sets that resolve here, by benchmark: the records are checked against them."""
    from lmms_contam.registry.specs import perturbable
    from lmms_contam.schema import PerturbedSetError
    from lmms_contam.set_locations import resolve, set_files

    files = {}
    for benchmark in perturbable():
        try:
            files |= dict.fromkeys(set_files(resolve(benchmark, fetch=False)), benchmark)
        except PerturbedSetError:  # none here (or not fetched yet): nothing of it to overwrite
            continue
    return files


def _outputs_are_not_inputs(args: argparse.Namespace) -> None:
    """An output naming a file of the runs it reads would replace its own input, and two outputs naming one file
    would lose one: refused before anything is read."""
    from lmms_contam.hosts.readers import read_files
    from lmms_contam.report.inputs import ReportInputError

    if not (args.markdown or args.json or args.html):
        return
    inputs = read_files([*args.paths, *_baseline_paths(args).values()])
    if args.scans:  # a scan folder is read whole
        inputs |= {path.resolve() for path in [Path(args.scans), *Path(args.scans).rglob("*")]}
    sets = _set_files()
    written: dict[Path, str] = {}
    for flag, output in (("--markdown", args.markdown), ("--json", args.json), ("--html", args.html)):
        if not output:
            continue
        target = Path(output).resolve()
        if target in inputs:
            raise ReportInputError(f"{flag} {output}: is a file of the runs the report reads; write it elsewhere")
        if target in sets:
            raise ReportInputError(f"{flag} {output}: is a file of {sets[target]}'s perturbed set; write it elsewhere")
        if target in written:
            raise ReportInputError(f"{flag} {output}: is {written[target]}'s file too; give each output its own")
        written[target] = flag


def _report(args: argparse.Namespace) -> int:
    from lmms_contam.hosts.base import ReadOptions
    from lmms_contam.hosts.readers import read_runs
    from lmms_contam.report.build import build
    from lmms_contam.report.inputs import Loaded, ReportInputError, baseline_runs

    try:
        _outputs_are_not_inputs(args)
        options = ReadOptions(pair_differing_settings=args.pair_differing_settings)
        loaded = read_runs(args.paths, options) if args.paths else Loaded([], [])
        baselines = {}
        for detector, path in _baseline_paths(args).items():
            baselines |= baseline_runs(read_runs([path]), path, detector)
        _, markdown = build(
            loaded,
            alpha=args.alpha,
            markdown=args.markdown,
            json_path=args.json,
            html_path=args.html,
            scans=args.scans,
            baselines=baselines,
        )
    except (ReportInputError, ValueError) as exc:
        return stop("report", exc)
    except OSError as exc:  # an output that cannot be written: none was
        return stop("report", f"cannot write the report ({exc}); no output was written")
    for path in loaded.ignored:
        print(f"lmms-contam report: not read: {path}", file=sys.stderr)
    if not (args.markdown or args.json or args.html):
        print(markdown)
    for label, path in (("markdown", args.markdown), ("json", args.json), ("html", args.html)):
        if path:
            print(f"{label}: {path}", file=sys.stderr)
    return 0


# Each detector's Baseline option (detectors/), spelt here so that building the parser imports no detector;
# tests/unit/test_host_registry.py checks the two agree.
BASELINE_OPTIONS = {
    "--text-only-baseline": (
        "text_only",
        "the base LLM's output of the *_text_only tasks: text-only leakage is then MMStar's multi-modal leakage, "
        "max(0, S_wv - S_t), with S_t that run's accuracy on the same items (default: against chance, 1 / options)",
    ),
    "--circular-reference": (
        "circular",
        "a clean reference model's output of the *_circular tasks: CircularEval is then the model's drop beyond "
        "that model's on the same items (default: against no drop, which flags any model that does not read the "
        "options perfectly)",
    ),
    "--masked-option-reference": (
        "masked_option",
        "a clean reference model's output of the *_masked_option tasks: masked-option guessing is then measured "
        "against its exact matches on the same items (default: the benchmark's rate by construction, which only "
        "procedural benchmarks state; without either there is no p-value)",
    ),
}


def _baseline_paths(args: argparse.Namespace) -> dict[str, str]:
    """Per detector, the reference model's run the user named with its Baseline option."""
    named = {detector: getattr(args, f"{detector}_baseline") for detector, _ in BASELINE_OPTIONS.values()}
    return {detector: path for detector, path in named.items() if path}


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_report(commands)


def _add_report(commands: argparse._SubParsersAction) -> None:
    from lmms_contam.hosts.registry import HOSTS

    hosts = ", ".join(host.name for host in HOSTS.values())
    report = commands.add_parser(
        "report",
        help=f"contamination verdicts from the runs of the plugin's tasks ({hosts}): Markdown, JSON, HTML",
        description=f"Read the runs of the plugin's tasks by every registered host ({hosts}; lmms-eval's with "
        "--log_samples): *_contam, or *_original and *_perturbed from separate runs, for any number of models, "
        "several hosts' folders in one call. Every record is joined to the set by content; every figure a host "
        "states is recomputed from its records, or named as unchecked. For each model and "
        "benchmark: accuracies, delta with a 95% CI (stratified, pairs kept together), exact McNemar test with Holm's "
        "correction across benchmarks, and a verdict: contaminated (delta < 0, significant), "
        "inconclusive (delta < 0, not significant) or no evidence (delta >= 0).",
    )
    report.add_argument("paths", nargs="*", help="; ".join(host.outputs for host in HOSTS.values()))
    report.add_argument("--scans", help="an `lmms-contam scan` output folder: adds the image-only and image-text rates")
    report.add_argument("--html", help="write a self-contained HTML page with plots and flagged image pairs")
    report.add_argument("--markdown", help="write the Markdown tables here (default: print them)")
    report.add_argument("--json", help="write the versioned JSON here")
    report.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    for option, (detector, about) in BASELINE_OPTIONS.items():
        report.add_argument(option, metavar="RUN", dest=f"{detector}_baseline", help=about)
    report.add_argument(
        "--pair-differing-settings",
        action="store_true",
        help="leaderboard mode: pair a built-in run with a *_perturbed run made with other prompt, model or "
        "generation settings (refused by default: the delta could come from them); the verdict then says so",
    )
    report.set_defaults(run=_report)
