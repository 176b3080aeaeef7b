"""Commands that build and verify perturbed sets."""

from __future__ import annotations

import argparse
from pathlib import Path

from lmms_contam.commands.common import ORIGINALS_DEFAULT, add_failure_rate_argument, hub_repo_id, stop
from lmms_contam.commands.sets import push_set
from lmms_contam.registry.specs import perturb_from_hub


def _shard(text: str | None) -> tuple[int, int]:
    if not text:
        return (0, 1)
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes I/N (e.g. 0/4), got {text!r}") from None
    return index, count


def _perturb(args: argparse.Namespace) -> int:
    from itertools import islice

    from lmms_contam.benchmarks import loaders
    from lmms_contam.llm import TooManyFailures
    from lmms_contam.perturb import pipeline
    from lmms_contam.perturb.config import PerturbConfig
    from lmms_contam.schema import PerturbedSetError
    from lmms_contam.set_locations import originals_source

    try:
        config = PerturbConfig.from_yaml(args.config)
        originals = originals_source(args.benchmark, args.originals)
        items = loaders.items(args.benchmark, loaders.load_rows(args.benchmark, originals))
        built = pipeline.perturb_benchmark(
            args.benchmark,
            islice(items, args.limit),
            config,
            args.out,
            shard=_shard(args.shard),
            max_failure_rate=args.max_failure_rate,
        )
    except (ValueError, PerturbedSetError, FileNotFoundError) as exc:
        return stop("perturb", exc)
    except TooManyFailures as exc:
        return stop(
            "perturb",
            f"no set written: {exc}. Counts in {Path(args.out) / 'data.manifest.json'}; rerun "
            "the same command once the endpoint works (finished items are not repeated)",
            1,
        )
    if built.shard:
        print(f"{args.benchmark}: shard {built.shard} done in {args.out}/work; run without --shard to assemble")
        return 0
    print(f"{args.benchmark}: kept {built.kept} of {built.items} items -> {args.out}")
    for stage, reasons in built.skipped.items():
        for reason, count in sorted(reasons.items()):
            print(f"  {stage}: {count} {reason}")
    caption, judge = built.cost["caption"], built.cost["judge"]
    print(f"  API: caption {caption['calls']} calls ${caption['usd']}, judge {judge['calls']} calls ${judge['usd']}")
    if args.push_to_hub and built.kept:
        return push_set(args.out, args.push_to_hub, args.private, "perturb")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from lmms_contam.llm import TooManyFailures
    from lmms_contam.perturb.config import PerturbConfig
    from lmms_contam.perturb.verify_set import first_image_size, verify_set
    from lmms_contam.registry.specs import perturbable
    from lmms_contam.schema import VERIFIED_SUBSET, PerturbedSetError
    from lmms_contam.set_locations import resolve

    try:
        folder = Path(args.set)
        if not folder.exists() and args.set in perturbable():  # a benchmark: the set its tasks resolve
            folder = Path(resolve(args.set).value)  # fetched first where the release has it
            folder = folder.parent if folder.name == VERIFIED_SUBSET else folder
        config = PerturbConfig.from_yaml(args.config)
        calibration = None
        if args.calibrate is not None:  # 0 is refused, not ignored
            from lmms_contam.synthetic.calibration import calibrate, check_count, summary

            check_count(args.calibrate)  # before the set is opened

            measured = calibrate(
                config, folder / "verify-work", args.calibrate, first_image_size(folder), args.max_failure_rate
            )
            print(summary(measured))
            calibration = measured.as_record()
        verified = verify_set(folder, config, args.max_failure_rate, calibration)
    except (ValueError, PerturbedSetError, FileNotFoundError) as exc:
        return stop("verify", exc)
    except TooManyFailures as exc:
        return stop("verify", f"nothing written: {exc}; rerun when the endpoint works (verdicts made are kept)", 1)
    print(
        f"{verified.benchmark}: kept {verified.kept} of {verified.items} items -> {verified.folder} (the tasks "
        "read it from now on)"
    )
    for outcome, count in sorted(verified.outcomes.items()):
        print(f"  {count}: {outcome}")
    print(f"  judge: {verified.judge_calls} verdicts stored, ${verified.cost_usd}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_perturb(commands)
    _add_verify(commands)


def _add_perturb(commands: argparse._SubParsersAction) -> None:
    perturb = commands.add_parser(
        "perturb",
        help="build a perturbed benchmark: answer swap, edit caption, Flux image edit, verification",
        description="Build counterfactual items (resumable: rerun the same command after a crash). Stages: "
        "answer swap (seeded), edit caption (a VLM over an OpenAI-compatible endpoint), image edit (Flux + Canny "
        "ControlNet, or Kontext), verification (judge + drift check). Writes <out>/data.parquet, "
        "<out>/data.manifest.json, and <out>/review.html + <out>/review.json for human review: set a candidate's "
        "decision to keep or reject there and rerun to rebuild the set. Per-item stage results stay in <out>/work.",
    )
    perturb.add_argument("benchmark", choices=perturb_from_hub())
    perturb.add_argument(
        "--config",
        required=True,
        help="a recipe: configs/perturb/paper.yaml (the authors' procedure), flux_canny.yaml "
        "(the same numbers on diffusers' pipeline), flux_kontext.yaml, or your own",
    )
    perturb.add_argument("--out", required=True, help="output folder")
    perturb.add_argument("--originals", help=f"a local copy of the benchmark {ORIGINALS_DEFAULT}")
    perturb.add_argument("--limit", type=int, help="only the first N items (for a trial run)")
    perturb.add_argument(
        "--shard",
        metavar="I/N",
        help="only every N-th item from the I-th, e.g. one process per GPU with CUDA_VISIBLE_DEVICES=I; "
        "then run once without --shard to assemble the set (no stage is repeated)",
    )
    perturb.add_argument(
        "--push-to-hub",
        type=hub_repo_id,
        metavar="NAMESPACE/NAME",
        help="then push the set to this hub dataset repository (created if missing; token: "
        "HF_TOKEN or `hf auth login`)",
    )
    perturb.add_argument("--private", action="store_true", help="create the hub repository as private")
    add_failure_rate_argument(perturb)
    perturb.set_defaults(run=_perturb)


def _add_verify(commands: argparse._SubParsersAction) -> None:
    verify = commands.add_parser(
        "verify",
        help="verify a perturbed set (imported or built): keep only counterfactuals that show the new answer",
        description="Run the perturbation pipeline's verification on a set: a judge model over an OpenAI-compatible "
        "endpoint keeps an item only if exactly one option is right and it is the new answer; a drift check rejects "
        "images left unchanged or no longer like their original. Writes the kept items to <SET>/verified/ (the tasks "
        "read them instead of the full set) with a manifest of counts and cost, and <SET>/verified/review.html; set "
        "a decision (keep, reject) in <SET>/verified/review.json and rerun to apply it. Resumable: a rerun repeats no "
        "finished call.",
    )
    verify.add_argument("set", help="a set folder (data.parquet), or a benchmark name for the set its tasks resolve")
    verify.add_argument(
        "--config",
        default=str(Path(__file__).parents[1] / "configs" / "perturb" / "paper.yaml"),
        help="a recipe whose verify section names the judge and the drift thresholds (default: the paper's, judge o3)",
    )
    verify.add_argument(
        "--calibrate",
        type=int,
        metavar="N",
        help="first ask the judge about N procedural counterfactuals of known truth (half good, half "
        "flawed in four ways, at the set's image size) and record how often it keeps a flawed one or "
        "rejects a good one, with 95%% intervals, in the verified set's manifest; the report warns "
        "when the keep rate is above the one the judge-quality study found safe. Simple shapes: a "
        "lower bound on the judge's errors. 2 to 10,000; try 200",
    )
    add_failure_rate_argument(verify)
    verify.set_defaults(run=_verify)
