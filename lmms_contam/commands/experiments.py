"""The controlled-contamination experiment and the flaw study: `demo` and `experiment`."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from lmms_contam.commands.common import at_least, stop
from lmms_contam.hosts import lmms_eval, vlmevalkit

HOSTS = {lmms_eval.KEY: lmms_eval.NAME, vlmevalkit.KEY: vlmevalkit.NAME}  # --host's choices -> the hosts' names


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
    from lmms_contam.synthetic import experiment
    from lmms_contam.synthetic.evaluate import EvaluationError

    demo = args.command == "demo"
    try:
        if args.flaws and args.judge_errors:
            raise ValueError("--flaws and --judge-errors are two studies: run one, then the other (same --out)")
        if args.judge_errors:
            from lmms_contam.synthetic import judge_study

            study = judge_study.DEMO_JUDGES if demo else judge_study.FULL_JUDGES
            flaws = dataclasses.replace(study.flaws, setup=_with_overrides(study.flaws.setup, args))
            outcome = judge_study.run_judge_study(dataclasses.replace(study, flaws=flaws), args.out)
            text, written = judge_study.judge_table(outcome), f"summary: {(Path(args.out) / 'judges.json').resolve()}"
        elif args.flaws:
            from lmms_contam.synthetic import flaw_study

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
    print(text)
    print(
        f"\n{sum(c.passed for c in outcome.checks)}/{len(outcome.checks)} checks passed "
        f"in {outcome.seconds / 60:.1f} min"
    )
    print(written)
    return 0 if outcome.passed else 1


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_demo(commands)
    _add_experiment(commands)


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
        "VLMEvalKit's API model asking them served on 127.0.0.1 (models trained on its prompt, under "
        "OUT/vlmevalkit)",
    )
    demo.add_argument(
        "--flaws",
        action="store_true",
        help="the flaw study in small instead: flaw rates 0 and 0.4, each set before and after "
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
        "set before and after verification; writes flaws.json",
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
    full.set_defaults(run=_experiment)
