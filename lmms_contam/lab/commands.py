"""The laboratory's commands: the controlled-contamination experiment and its flaw and judge studies (`demo`,
`experiment`), and the scan's speed bench (`bench-scan`). The CLI finds them through the `lmms_contam.commands`
entry-point group; this module imports nothing heavy, so `lmms-contam --help` stays fast."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from lmms_contam.commands.common import at_least, stop
from lmms_contam.commands.corpus import add_embedder_arguments
from lmms_contam.hosts import inspect_ai, lmms_eval, vlmevalkit

HOSTS = {host.KEY: host.NAME for host in (lmms_eval, vlmevalkit, inspect_ai)}  # --host's choices -> the hosts' names


def _with_overrides(setup, args: argparse.Namespace):
    if getattr(args, "host", lmms_eval.KEY) != lmms_eval.KEY:
        if args.flaws or args.judge_errors:
            raise ValueError("--flaws and --judge-errors run through lmms-eval only")
        setup = dataclasses.replace(setup, host=HOSTS[args.host])
    if getattr(args, "seeds", None):
        setup = dataclasses.replace(setup, seeds=tuple(int(s) for s in args.seeds.split(",")))
    if getattr(args, "items", None):
        setup = dataclasses.replace(setup, recipe=dataclasses.replace(setup.recipe, test_items=args.items))
    return setup


def _experiment(args: argparse.Namespace) -> int:
    from lmms_contam.lab import experiment
    from lmms_contam.lab.evaluate import EvaluationError

    demo = args.command == "demo"
    if getattr(args, "detectors", False):
        return _race(args)
    try:
        if args.flaws and args.judge_errors:
            raise ValueError("--flaws and --judge-errors are two studies: run one, then the other (same --out)")
        if args.judge_errors:
            from lmms_contam.lab import judge_study

            study = judge_study.DEMO_JUDGES if demo else judge_study.FULL_JUDGES
            flaws = dataclasses.replace(study.flaws, setup=_with_overrides(study.flaws.setup, args))
            outcome = judge_study.run_judge_study(dataclasses.replace(study, flaws=flaws), args.out)
            text, written = judge_study.judge_table(outcome), f"summary: {(Path(args.out) / 'judges.json').resolve()}"
        elif args.flaws:
            from lmms_contam.lab import flaw_study

            study = flaw_study.DEMO_FLAWS if demo else flaw_study.FULL_FLAWS
            outcome = flaw_study.run_flaw_study(
                dataclasses.replace(study, setup=_with_overrides(study.setup, args)), args.out
            )
            text, written = flaw_study.flaw_table(outcome), f"summary: {(Path(args.out) / 'flaws.json').resolve()}"
        else:
            outcome = experiment.run_experiment(
                _with_overrides(experiment.DEMO if demo else experiment.FULL, args), args.out
            )
            text, written = experiment.experiment_table(outcome), f"report: {outcome.report_html.resolve()}"
    except (EvaluationError, ValueError) as exc:  # SetupMismatch is a ValueError
        return stop(args.command, exc)
    return _finish(text, outcome, written)


def _finish(text: str, outcome, written: str) -> int:
    """The table, how many checks passed, where the outputs are; exit 1 unless every check passed."""
    print(text)
    print(
        f"\n{sum(c.passed for c in outcome.checks)}/{len(outcome.checks)} checks passed "
        f"in {outcome.seconds / 60:.1f} min"
    )
    print(written)
    return 0 if outcome.passed else 1


def _race(args: argparse.Namespace) -> int:
    from lmms_contam.lab.evaluate import EvaluationError
    from lmms_contam.lab.race import run_race
    from lmms_contam.lab.race_models import RaceRecipe
    from lmms_contam.lab.race_table import race_table

    if args.flaws or args.judge_errors or args.host != lmms_eval.KEY:
        return stop(args.command, "--detectors runs through lmms-eval alone, apart from --flaws and --judge-errors")
    recipe = RaceRecipe()
    if args.seeds:
        recipe = dataclasses.replace(recipe, seeds=tuple(int(s) for s in args.seeds.split(",")))
    try:
        outcome = run_race(recipe, args.out)
    except (EvaluationError, ValueError) as exc:
        return stop(args.command, exc)
    written = f"table, plot and summary: {(Path(args.out) / 'race.md').resolve()}, race.png, race.json"
    return _finish(race_table(outcome), outcome, written)


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_demo(commands)
    _add_experiment(commands)
    _add_bench_scan(commands)


def _add_demo(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="the whole loop offline on the CPU in minutes: train, contaminate, evaluate, report",
        description="The controlled-contamination experiment in small (one seed, 500 synthetic items, the "
        "highest degree only): a tiny LLaVA trained from scratch (clean), copies fine-tuned on the test items "
        "(full and LoRA) and on as many fresh items (control), each evaluated by lmms-eval's llava_hf loader "
        "on synthetic_contam (the clean and the fully fine-tuned model also on the peer detector tasks). Prints "
        "the table and the checks, and ends with the HTML report's path. 6 to 11 minutes on 2 cores; nothing "
        "is downloaded. Rerunning reuses finished models.",
    )
    demo.add_argument("--out", default="lmms-contam-demo", help="working folder (default ./lmms-contam-demo)")
    demo.add_argument("--items", type=at_least(100), help="test items (default 500; fewer make the verdicts noisy)")
    demo.add_argument(
        "--host",
        choices=HOSTS,
        default=lmms_eval.KEY,
        help="the harness that evaluates the models: lmms-eval's llava_hf loader (default), or "
        "VLMEvalKit's or inspect-ai's API model asking them served on 127.0.0.1 (models trained on that "
        "harness's prompt, under OUT/vlmevalkit or OUT/inspect; inspect needs the [inspect] extra)",
    )
    demo.add_argument(
        "--flaws",
        action="store_true",
        help="the flaw study in small instead: flaw rates 0 and 0.4, each set read before and after "
        "`lmms-contam verify` (the same models; a few minutes more)",
    )
    demo.add_argument(
        "--judge-errors",
        action="store_true",
        help="how good the verifying judge must be, in small: at flaw rate 0.4, judges that keep "
        "flawed counterfactuals (0 or 20%%) and reject good ones (0 or 30%%) each verify the set, "
        "and each model's verdict is read on the items each kept",
    )
    demo.set_defaults(run=_experiment)


def _add_experiment(commands: argparse._SubParsersAction) -> None:
    full = commands.add_parser(
        "experiment",
        help="the full controlled-contamination experiment (3 seeds, 3 degrees, full and LoRA, control)",
        description="As `demo`, with 1000 items, three seeds and three degrees of contamination (fine-tuning "
        "epochs fixed in advance); checks that clean models and controls are not flagged, that contamination "
        "inflates the score, that every highest-degree model is flagged, and that the delta falls as the degree "
        "rises. Under an hour on 2 cores, with the peer detectors (README); resumable.",
    )
    full.add_argument("--out", default="lmms-contam-experiment", help="working folder")
    full.add_argument("--seeds", help="comma-separated seeds (default 0,1,2)")
    full.add_argument(
        "--host", choices=HOSTS, default=lmms_eval.KEY, help="the harness that evaluates the models (as for demo)"
    )
    full.add_argument(
        "--flaws",
        action="store_true",
        help="the flaw study instead: how many flawed counterfactuals make a clean model look "
        "contaminated, and whether `lmms-contam verify` prevents it. Flaw rates 0, 0.1, 0.2 and 0.4; "
        "the clean, control and 30-epoch models of every seed, each evaluated by lmms-eval on every "
        "set and read on it before and after verification (one subset also run directly); writes flaws.json",
    )
    full.add_argument(
        "--judge-errors",
        action="store_true",
        help="the judge-quality study: at flaw rates 0.2 and 0.4, judges keeping flawed "
        "counterfactuals at 0, 5, 10, 20 or 40%% and rejecting good ones at 0, 10 or 30%%, each "
        "verifying through `verify`'s own code; every model of every seed read on each judge's kept "
        "items (one lmms-eval run per model and flaw rate, restricted; one direct run checks that); "
        "writes judges.json",
    )
    full.add_argument(
        "--detectors",
        action="store_true",
        help="the detector race instead: on the varied procedural benchmark, a clean model that reads the options, "
        "and per seed copies fine-tuned on four kinds of contamination (image+question+answer, text only, image "
        "only, answers in one fixed option order) and a control; every detector (semantic perturbation, "
        "CircularEval, option shuffle, text-only, masked option) on every model through lmms-eval; writes the "
        "table of false accusations and detection rates with exact 95%% intervals (race.md), its plot (race.png) "
        "and race.json. About 90 minutes on 2 cores, 50 of them the clean model; resumable",
    )
    full.set_defaults(run=_experiment)


def _bench_scan(args: argparse.Namespace) -> int:
    from lmms_contam.lab import speed

    names = ("eval", "corpus", "dim", "shards", "k", "images", "embedder", "dtype", "vectors", "growth", "scan_device")
    settings = {name: getattr(args, name) for name in names}
    if args.plot and not args.growth:
        return stop("bench-scan", "--plot draws the --growth figures: give both")
    if args.growth and args.scan_device != "cpu":
        return stop("bench-scan", "--growth measures the CPU scan: leave --scan-device out")
    try:
        if args.growth:
            return _bench_growth(args, settings)
        from lmms_contam.corpus.embedder_configs import embedder_config

        embedder = embedder_config(args.embedder).build(args.device)
        measured = speed.measure(
            args.eval,
            args.corpus,
            args.dim,
            args.shards,
            args.k,
            args.images,
            embedder,
            args.dtype,
            args.vectors,
            args.scan_device,
        )
    except ValueError as exc:
        return stop("bench-scan", exc)
    print(speed.speed_table(measured.figures))
    print("\n".join(measured.check.lines()))
    _write_json(args.json, speed.as_json(measured.figures, settings, measured.check))
    return 0


def _bench_growth(args: argparse.Namespace, settings: dict) -> int:
    import tempfile

    from lmms_contam.lab import speed

    with tempfile.TemporaryDirectory(prefix="lmms-contam-growth-") as folder:
        points = speed.growth(args.eval, args.corpus, args.dim, args.shards, args.k, Path(folder), args.vectors)
    print(speed.growth_table(points))
    if args.plot:
        speed.plot_growth(points, Path(args.plot))
        print(f"plot: {args.plot}")
    _write_json(args.json, speed.growth_json(points, settings))
    return 0


def _write_json(path: str | None, text: str) -> None:
    if path:
        from lmms_contam.atomic import atomic_path

        with atomic_path(Path(path)) as tmp:
            tmp.write_text(text + "\n")


def _add_bench_scan(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench-scan",
        help="measure the scan and the embedding pipeline against baselines timed in the same run",
        description="Times the exact scan against the bare matrix products of the same shapes and faiss "
        "IndexFlatIP on the same vectors, the embedding pipeline against the model's forward on pre-decoded "
        "tensors, embed-once + scan against the per-pair recipe (extrapolated from a few pairs), a scan whose shard "
        "pages were evicted against a warm one (and its read rate against a plain sequential read), and peak "
        "memory for a 4x larger memory-mapped corpus. Prints measured figures and their ratios, where the scan's "
        "time goes, and its result checked against float64 brute force. --growth measures how cost grows instead.",
    )
    bench.add_argument("--eval", type=at_least(1), default=5000, help="eval vectors (default 5000)")
    bench.add_argument("--corpus", type=at_least(1), default=100_000, help="corpus vectors (default 100000)")
    bench.add_argument("--dim", type=at_least(1), default=768, help="vector dimension (default 768, ViT-L/14)")
    bench.add_argument("--shards", type=at_least(1), default=4, help="corpus shards (default 4)")
    bench.add_argument("--k", type=at_least(1), default=10, help="top-k (default 10)")
    bench.add_argument("--images", type=at_least(2), default=64, help="images for the embedding figures")
    bench.add_argument(
        "--dtype",
        choices=["float16", "float32"],
        default="float16",
        help="how the corpus shards are stored (default float16, as LAION's dumps)",
    )
    bench.add_argument(
        "--vectors",
        choices=["random", "clip-like"],
        default="random",
        help="the vectors scanned: random unit vectors, or clip-like ones (a shared mean direction, 200 clusters, "
        "near-copies planted around the 0.9 threshold; lmms_contam/lab/speed.py ClipLike)",
    )
    bench.add_argument(
        "--growth",
        action="store_true",
        help="instead: time the scan at 1x, 2x, 4x the corpus and the eval set, print the growth exponents and "
        "the peak memory at each size",
    )
    bench.add_argument("--plot", help="with --growth: also draw time and memory against size into this PNG")
    bench.add_argument("--json", help="also write the figures as JSON here")
    bench.add_argument(
        "--scan-device",
        default="cpu",
        help="torch device for the scan's products (default cpu; e.g. cuda: float16 there, timed against its own "
        "bare products and faiss on the CPU, cold against warm to show whether reading the shards bounds it)",
    )
    add_embedder_arguments(bench, default="efficientnet-lite0")
    bench.set_defaults(run=_bench_scan)
