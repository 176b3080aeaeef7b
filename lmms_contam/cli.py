"""`lmms-contam`: thin command line over the package's modules."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from lmms_contam import __version__
from lmms_contam.benchmarks import SCANNABLE


def _tasks_dir(_args: argparse.Namespace) -> int:
    from lmms_contam.harness.registration import tasks_dir

    print(tasks_dir())
    return 0


def _datasets(args: argparse.Namespace) -> int:
    """Show where each benchmark's perturbed set resolves, and check it when asked."""
    from lmms_contam.harness.datasets import load_perturbed_set, resolve
    from lmms_contam.schema import BENCHMARK_COLUMNS, PerturbedSetError

    status = 0
    for benchmark in args.benchmark or sorted(BENCHMARK_COLUMNS):
        try:
            location = resolve(benchmark)
            line = f"{benchmark}: {location.kind} {location.value} (via {location.found_via})"
            if args.check:
                line += f", {len(load_perturbed_set(benchmark))} valid rows"
            print(line)
        except PerturbedSetError as exc:
            print(f"{benchmark}: {exc}", file=sys.stderr)
            status = 1
    return status


def _report(args: argparse.Namespace) -> int:
    from lmms_contam.report.build import build
    from lmms_contam.report.inputs import ReportInputError

    try:
        _, markdown = build(args.paths, alpha=args.alpha, markdown=args.markdown, json_path=args.json,
                            html_path=args.html, scans=args.scans)  # fmt: skip
    except (ReportInputError, ValueError) as exc:
        print(f"lmms-contam report: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output that cannot be written: none was
        print(f"lmms-contam report: cannot write the report ({exc}); no output was written", file=sys.stderr)
        return 2
    if not (args.markdown or args.json or args.html):
        print(markdown)
    for label, path in (("markdown", args.markdown), ("json", args.json), ("html", args.html)):
        if path:
            print(f"{label}: {path}", file=sys.stderr)
    return 0


def _import_mm_perturb(args: argparse.Namespace) -> int:
    from lmms_contam.benchmarks import loaders, mm_perturb
    from lmms_contam.harness.datasets import default_folder, originals_source
    from lmms_contam.schema import PerturbedSetError

    benchmark = args.benchmark or mm_perturb.benchmark_from_name(args.tsv)
    if benchmark is None:
        print(f"lmms-contam import: cannot tell the benchmark from {args.tsv}; pass --benchmark", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else default_folder(benchmark)
    try:
        originals = loaders.items(benchmark, loaders.load_rows(benchmark, originals_source(benchmark, args.originals)))
        summary = mm_perturb.import_release(benchmark, args.tsv, args.images, originals, out, keep=args.keep)
    except (PerturbedSetError, ValueError, FileNotFoundError) as exc:
        print(f"lmms-contam import: {exc}", file=sys.stderr)
        return 2
    print(f"{benchmark}: {summary.kept} of {summary.rows} rows imported into {out}")
    for reason, count in sorted(summary.skipped.items()):
        print(f"  skipped {count}: {reason}")
    return 0


def _fetch_mm_perturb(args: argparse.Namespace) -> int:
    from lmms_contam.benchmarks.mm_perturb_release import fetch_release
    from lmms_contam.download import DownloadError
    from lmms_contam.harness.datasets import default_folder, home, originals_source
    from lmms_contam.schema import PerturbedSetError

    benchmarks = ["mmstar", "realworldqa"] if args.benchmark == "all" else [args.benchmark]
    if args.originals and len(benchmarks) > 1:
        print("lmms-contam fetch: --originals is a local copy of one benchmark; give --benchmark", file=sys.stderr)
        return 2
    sets = {b: Path(args.out) / b if args.out else default_folder(b) for b in benchmarks}
    try:
        summaries = fetch_release(benchmarks, sets, home() / "downloads" / "mm-perturb",
                                  {b: originals_source(b, args.originals) for b in benchmarks})  # fmt: skip
    except (DownloadError, PerturbedSetError, ValueError) as exc:
        print(f"lmms-contam fetch: {exc}", file=sys.stderr)
        return 2
    for benchmark, summary in summaries.items():
        print(f"{benchmark}: {summary.kept} of {summary.rows} released rows imported into {sets[benchmark]} "
              "(not verified: the release is unfiltered; see the README)")  # fmt: skip
        for reason, count in sorted(summary.skipped.items()):
            print(f"  skipped {count}: {reason}")
    return 0


def _import_datacomp(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.datacomp import import_datacomp

    try:
        summary = import_datacomp(args.source, args.out, args.recipe, args.key)
    except (ValueError, FileNotFoundError, TypeError) as exc:  # TypeError: a recipe.json with other fields
        print(f"lmms-contam import datacomp: {exc}", file=sys.stderr)
        return 2
    print(f"{summary['rows']} vectors in {summary['shards']} shard(s) -> {args.out} "
          f"({summary['shards_reused']} reused)")  # fmt: skip
    return 0


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
    from lmms_contam.harness.datasets import originals_source
    from lmms_contam.llm import TooManyFailures
    from lmms_contam.perturb import pipeline
    from lmms_contam.perturb.config import PerturbConfig
    from lmms_contam.schema import PerturbedSetError

    try:
        config = PerturbConfig.from_yaml(args.config)
        originals = originals_source(args.benchmark, args.originals)
        items = loaders.items(args.benchmark, loaders.load_rows(args.benchmark, originals))
        manifest = pipeline.run(args.benchmark, islice(items, args.limit), config, args.out, shard=_shard(args.shard),
                                max_failure_rate=args.max_failure_rate)  # fmt: skip
    except (ValueError, PerturbedSetError, FileNotFoundError) as exc:
        print(f"lmms-contam perturb: {exc}", file=sys.stderr)
        return 2
    except TooManyFailures as exc:
        print(f"lmms-contam perturb: no set written: {exc}. Counts in {Path(args.out) / 'data.manifest.json'}; "
              "rerun the same command once the endpoint works (finished items are not repeated)",
              file=sys.stderr)  # fmt: skip
        return 1
    if "shard" in manifest:
        print(f"{args.benchmark}: shard {manifest['shard']} done in {args.out}/work; run without --shard to assemble")
        return 0
    print(f"{args.benchmark}: kept {manifest['kept']} of {manifest['items']} items -> {args.out}")
    for stage, reasons in manifest["skipped"].items():
        for reason, count in sorted(reasons.items()):
            print(f"  {stage}: {count} {reason}")
    cost = manifest["cost"]
    print(f"  API: caption {cost['caption']['calls']} calls ${cost['caption']['usd']}, "
          f"judge {cost['judge']['calls']} calls ${cost['judge']['usd']}")  # fmt: skip
    if args.push_to_hub and manifest["kept"]:
        return _push_set(args.out, args.push_to_hub, args.private, "perturb")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from lmms_contam.harness.datasets import resolve
    from lmms_contam.llm import TooManyFailures
    from lmms_contam.perturb.config import PerturbConfig
    from lmms_contam.perturb.verify_set import verify_set
    from lmms_contam.schema import BENCHMARK_COLUMNS, VERIFIED_SUBSET, PerturbedSetError

    try:
        folder = Path(args.set)
        if not folder.exists() and args.set in BENCHMARK_COLUMNS:  # a benchmark: the set its tasks resolve
            folder = Path(resolve(args.set).value)  # fetched first where the release has it
            folder = folder.parent if folder.name == VERIFIED_SUBSET else folder
        manifest = verify_set(folder, PerturbConfig.from_yaml(args.config), args.max_failure_rate)
    except (ValueError, PerturbedSetError, FileNotFoundError) as exc:
        print(f"lmms-contam verify: {exc}", file=sys.stderr)
        return 2
    except TooManyFailures as exc:
        print(f"lmms-contam verify: nothing written: {exc}; rerun when the endpoint works (verdicts made are kept)",
              file=sys.stderr)  # fmt: skip
        return 1
    verification = manifest["verification"]
    print(f"{manifest['benchmark']}: kept {verification['kept']} of {verification['of']} items -> "
          f"{Path(manifest['source']).parent / VERIFIED_SUBSET} (the tasks read it from now on)")  # fmt: skip
    for outcome, count in sorted(manifest["outcomes"].items()):
        print(f"  {count}: {outcome}")
    cost = manifest["cost"]
    print(f"  judge: {cost['calls']} verdicts stored, ${cost['usd']}")
    return 0


def _push_set(folder: str, repo_id: str, private: bool, command: str) -> int:
    """Push a finished set; a failure leaves the local set as it was (complete, without a hub record)."""
    from lmms_contam.hub import push_perturbed_set

    try:
        commit = push_perturbed_set(folder, repo_id, private=private)
    except Exception as exc:  # the set's checks, the hub's answers, the network (its client's types vary by version)
        print(f"lmms-contam {command}: pushing {folder} to the hub dataset {repo_id} failed: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)  # fmt: skip
        return 1
    print(f"pushed to the hub: dataset {repo_id} at commit {commit}")
    return 0


def _push(args: argparse.Namespace) -> int:
    return _push_set(args.folder, args.repo_id, args.private, "push")


def _hub_repo_id(value: str) -> str:
    from lmms_contam.harness.datasets import HUB_ID

    if not HUB_ID.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a hub repository id (namespace/name)")
    return value


def _scan(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.embedders import embedder_config
    from lmms_contam.corpus.eval_sources import BenchmarkSource, DatasetSource, FolderSource
    from lmms_contam.corpus.run import scan_source
    from lmms_contam.corpus.runners import make_runner
    from lmms_contam.harness.datasets import originals_source

    sources = [BenchmarkSource(b, originals_source(b, args.originals)) for b in args.eval or []]
    sources += [FolderSource(folder) for folder in args.eval_folder]
    sources += [DatasetSource(d, args.split, args.image_column, args.id_column) for d in args.eval_dataset]
    if not sources:
        print("lmms-contam scan: nothing to scan; give --eval, --eval-folder or --eval-dataset", file=sys.stderr)
        return 2
    names = [source.name for source in sources]
    if len(set(names)) < len(names):
        print(f"lmms-contam scan: two eval sets would both be written as {names} in --out; scan them into "
              "separate folders", file=sys.stderr)  # fmt: skip
        return 2
    if args.originals and len(args.eval or []) != 1:
        print(
            "lmms-contam scan: --originals is a local copy of one benchmark; give exactly one --eval", file=sys.stderr
        )
        return 2
    try:
        config = embedder_config(args.embedder)
        embedder = config.build(args.device)
        threshold = config.threshold if args.threshold is None else args.threshold
        runner = make_runner(args.ray)
        index = None
        if args.index is not None:
            from lmms_contam.corpus.index import IndexSettings

            index = IndexSettings(args.index or None, args.candidates, args.nprobe)
        for source in sources:
            summary = scan_source(source, args.corpus, args.out, embedder, threshold, k=args.k,
                                  runner=runner, index=index, precision=args.precision,
                                  scan_device=args.scan_device)  # fmt: skip
            print(f"{source.name}: image-only contamination rate {summary['image_only_rate']:.3f} "
                  f"(similarity > {summary['threshold']}, {summary['images']} images, "
                  f"{summary['corpus_rows']} corpus rows)")  # fmt: skip
    except (ValueError, FileNotFoundError) as exc:
        print(f"lmms-contam scan: {exc}", file=sys.stderr)
        return 2
    return 0


def _index_corpus(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.index import build_index

    try:
        folder = build_index(args.corpus, args.factory, args.out)
    except (ValueError, RuntimeError, FileNotFoundError) as exc:  # faiss raises RuntimeError on bad factories
        print(f"lmms-contam index-corpus: {exc}", file=sys.stderr)
        return 2
    print(f"{args.factory} index of {args.corpus} -> {folder}")
    return 0


def _bench_scan(args: argparse.Namespace) -> int:
    from lmms_contam.corpus import bench
    from lmms_contam.corpus.embedders import embedder_config

    settings = {k: getattr(args, k) for k in ("eval", "corpus", "dim", "shards", "k", "images", "embedder", "dtype")}
    try:
        embedder = embedder_config(args.embedder).build(args.device)
        figures = bench.run(args.eval, args.corpus, args.dim, args.shards, args.k, args.images, embedder, args.dtype)
    except ValueError as exc:
        print(f"lmms-contam bench-scan: {exc}", file=sys.stderr)
        return 2
    print(bench.table(figures))
    if args.json:
        from lmms_contam.atomic import atomic_path

        with atomic_path(Path(args.json)) as tmp:
            tmp.write_text(bench.as_json(figures, settings) + "\n")
    return 0


def _embed_corpus(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.embedders import embedder_config
    from lmms_contam.corpus.ingest import embed_corpus

    try:
        config = embedder_config(args.embedder)
        embedder, engine = config.build(args.device), None
        if args.ray:
            from lmms_contam.corpus.ray_embed import RayDataEmbedding
            from lmms_contam.corpus.runners import make_runner

            make_runner(args.ray)  # connects to (or starts) the cluster
            engine = RayDataEmbedding(config, embedder.preparer, args.device, args.actors,
                                      args.gpus_per_actor, batch_size=embedder.batch_size)  # fmt: skip
        summary = embed_corpus(args.source, args.out, embedder, shard_size=args.shard_size,
                               image_column=args.image_column, engine=engine)  # fmt: skip
    except (ValueError, FileNotFoundError) as exc:
        print(f"lmms-contam embed-corpus: {exc}", file=sys.stderr)
        return 2
    print(
        f"{summary['embedded']} images embedded into {summary['shards']} shard(s) in {args.out} "
        f"({summary['shards_reused']} reused); {summary['skipped']} skipped (reasons in {args.out}/skipped/)"
    )
    return 0


def _judge(args: argparse.Namespace) -> int:
    from lmms_contam.harness.datasets import originals_source
    from lmms_contam.judge.candidates import MAX_CAPTION_CHARS, JudgeInputError
    from lmms_contam.judge.caption_judge import DEFAULT_TEMPLATE, CaptionJudgeSettings
    from lmms_contam.judge.run import judge_benchmark
    from lmms_contam.llm import EndpointConfig, TooManyFailures

    try:
        endpoint = second = settings = None
        if not args.prefilter_only:
            endpoint = EndpointConfig(model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                                      concurrency=args.concurrency)  # fmt: skip
            settings = CaptionJudgeSettings.from_file(args.template or DEFAULT_TEMPLATE,
                                               structured_output=args.structured_output)  # fmt: skip
            if args.second_model:
                second = dataclasses.replace(endpoint, model=args.second_model)
            elif args.judge_twice:
                second = endpoint
        summary = judge_benchmark(
            args.scans, args.benchmark, originals=originals_source(args.benchmark, args.originals), endpoint=endpoint,
            settings=settings,
            second=second, threshold=args.threshold, top_k=args.top_k, max_failure_rate=args.max_failure_rate,
        )  # fmt: skip
    except (JudgeInputError, ValueError, FileNotFoundError) as exc:
        print(f"lmms-contam judge: {exc}", file=sys.stderr)
        return 2
    except TooManyFailures as exc:
        print(f"lmms-contam judge: the judge's calls failed, no image-text rate: {exc}. Counts in "
              f"{Path(args.scans) / (args.benchmark + '.judge.json')}; rerun once the endpoint works (verdicts "
              "already made are not asked again)", file=sys.stderr)  # fmt: skip
        return 1
    n = summary["samples"]
    print(f"{args.benchmark}: {summary['matched_with_captions']} of {n} samples have captioned matches above "
          f"{summary['threshold']}; n-gram pre-filter rate {summary['prefilter_rate']:.3f}")  # fmt: skip
    if summary["matched_without_captions"]:
        print(f"  notice: {summary['matched_without_captions']} matched sample(s) have only empty captions")
    if summary["captions_truncated"]:
        print(f"  notice: {summary['captions_truncated']} caption(s) longer than {MAX_CAPTION_CHARS} characters "
              "were cut to that length")  # fmt: skip
    if "judge" in summary:
        judged = summary["judge"]
        counts = judged["counts"]
        print(f"{args.benchmark}: image-text contamination rate {judged['image_text_rate']:.3f} "
              f"({counts.get('answerable', 0)} answerable, {counts.get('not answerable', 0)} not, "
              f"{counts.get('unjudged', 0)} unjudged: up to {judged['image_text_rate_upper']:.3f})")  # fmt: skip
        if "agreement" in judged:
            agreement = judged["agreement"]
            print(f"  agreement with {agreement['second']}: {agreement['agree']} of {agreement['judged_by_both']}")
        for usage in judged["usage"]:
            print(f"  {usage['model']}: {usage['calls']} calls, {usage['cache_hits']} cached, ${usage['cost_usd']}")
    print(f"-> {Path(args.scans) / (args.benchmark + '.judge.json')}")
    return 0


def _at_least(minimum: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _benchmark_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCANNABLE]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown benchmark(s) {unknown or text!r}; choose among {SCANNABLE}")
    return names


def _with_overrides(setup, args: argparse.Namespace):
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
        if args.flaws:
            from lmms_contam.synthetic import flaw_study

            study = flaw_study.DEMO_FLAWS if demo else flaw_study.FULL_FLAWS
            outcome = flaw_study.run(dataclasses.replace(study, setup=_with_overrides(study.setup, args)), args.out)
            text, written = flaw_study.table(outcome), f"summary: {(Path(args.out) / 'flaws.json').resolve()}"
        else:
            outcome = experiment.run(_with_overrides(experiment.DEMO if demo else experiment.FULL, args), args.out)
            text, written = experiment.table(outcome), f"report: {outcome.report_html.resolve()}"
    except (EvaluationError, experiment.SetupMismatch) as exc:
        print(f"lmms-contam {args.command}: {exc}", file=sys.stderr)
        return 2
    print(text)
    print(f"\n{sum(c.passed for c in outcome.checks)}/{len(outcome.checks)} checks passed "
          f"in {outcome.seconds / 60:.1f} min")  # fmt: skip
    print(written)
    return 0 if outcome.passed else 1


def _add_embedder_arguments(command: argparse.ArgumentParser, default: str = "clip-vit-l-14") -> None:
    """How images become vectors; `scan` and `embed-corpus` must agree (their recipes are compared)."""
    command.add_argument("--embedder", default=default,
                         help="a named embedder (`lmms-contam embedders` lists them; clip-vit-l-14 is the paper's), "
                         "an embedder config file (.yaml), open_clip:MODEL/PRETRAINED or hf_clip:MODEL_ID_OR_FOLDER; "
                         f"default {default}")  # fmt: skip
    command.add_argument("--device", default="cpu", help="torch device for the embedder")


def _embedders(_args: argparse.Namespace) -> int:
    from lmms_contam.corpus.embedders import CONFIGS, named_embedders

    for config in named_embedders():
        model = " ".join(part for part in (config.model, config.weights) if part)
        print(f"{config.name:20} {config.family:18} threshold {config.threshold:<6} {model or '-':40} {config.about}")
    print(f"\n(configs in {CONFIGS}; --embedder also takes a config file of your own in the same form)")
    return 0


def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _add_failure_rate_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument("--max-failure-rate", type=_rate, default=0.5, metavar="SHARE",
                         help="exit 1 (counts kept, no result claimed) when a stage's API calls fail for more than "
                         "this share of its items, or for all of them (default 0.5)")  # fmt: skip


ORIGINALS_DEFAULT = "(default $LMMS_CONTAM_ORIGINALS_<BENCHMARK>, the config file's originals, else lmms-eval's hub id)"


def build_parser() -> argparse.ArgumentParser:
    from lmms_contam.corpus.scan import PRECISIONS

    parser = argparse.ArgumentParser(
        prog="lmms-contam",
        description="Contamination detection for vision-language models, run inside lmms-eval.",
    )
    parser.add_argument("--version", action="version", version=f"lmms-contam {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tasks_dir = commands.add_parser(
        "tasks-dir",
        help="print the folder of the plugin's task YAMLs (for lmms-eval --include_path)",
        description="Print the plugin's task folder. After `pip install lmms-contam`, lmms-eval finds the "
        "tasks by itself; `lmms-eval --include_path $(lmms-contam tasks-dir)` is the stable fallback.",
    )
    tasks_dir.set_defaults(run=_tasks_dir)

    sets = commands.add_parser(
        "datasets",
        help="show where each benchmark's perturbed set is found",
        description="Resolve each benchmark's perturbed set: $LMMS_CONTAM_DATASET_<BENCHMARK>, then the "
        "config file's `datasets:` entry, then $LMMS_CONTAM_HOME/datasets/<benchmark>.",
    )
    sets.add_argument("benchmark", nargs="*", help="benchmarks to show (default: all)")
    sets.add_argument("--check", action="store_true", help="also load and validate each set (decodes every image)")
    sets.set_defaults(run=_datasets)

    report = commands.add_parser(
        "report",
        help="contamination verdicts from lmms-eval output folders (Markdown, JSON, HTML)",
        description="Read lmms-eval outputs of the plugin's tasks (run with --log_samples): *_contam, or "
        "*_original and *_perturbed from separate runs, for any number of models. For each model and "
        "benchmark: accuracies, delta with a 95% paired bootstrap CI, exact McNemar test with Holm's "
        "correction across benchmarks, and a verdict: contaminated (delta < 0, significant), "
        "inconclusive (delta < 0, not significant) or no evidence (delta >= 0).",
    )
    report.add_argument("paths", nargs="*", help="lmms-eval --output_path folders, or results/samples files")
    report.add_argument("--scans", help="an `lmms-contam scan` output folder: adds the image-only and image-text rates")
    report.add_argument("--html", help="write a self-contained HTML page with plots and flagged image pairs")
    report.add_argument("--markdown", help="write the Markdown tables here (default: print them)")
    report.add_argument("--json", help="write the versioned JSON here")
    report.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    report.set_defaults(run=_report)

    importer = commands.add_parser("import", help="import released perturbed sets, or precomputed corpus features")
    sources = importer.add_subparsers(dest="source", required=True, metavar="SOURCE")
    release = sources.add_parser(
        "mm-perturb",
        help="the MMStar / RealWorldQA sets released with the semantic-perturbation paper",
        description="Convert the paper authors' VLMEvalKit TSV and image folder into a perturbed set. Original "
        "answers and images come from the original benchmark (the hub id lmms-eval uses, or --originals), "
        "joined on index. Rows that cannot be used are counted by reason, never dropped silently.",
    )
    release.add_argument("--tsv", required=True, help="MMStar_pert_local.tsv or RealWorldQA_pert_local.tsv")
    release.add_argument(
        "--images", required=True, help="the release's image folder (holding MMStar_semantic_flux/ ...)"
    )
    release.add_argument("--benchmark", choices=["mmstar", "realworldqa"], help="default: from the TSV's name")
    release.add_argument("--originals", help=f"a local copy of the original benchmark {ORIGINALS_DEFAULT}")
    release.add_argument("--keep", help="a file of indices to keep (the filtered subset), one per line")
    release.add_argument("--out", help="output folder (default: $LMMS_CONTAM_HOME/datasets/<benchmark>)")
    release.set_defaults(run=_import_mm_perturb)
    datacomp = sources.add_parser(
        "datacomp",
        help="DataComp's precomputed image features (.npz + .parquet per shard) as a corpus for `scan`",
        description="Convert every <shard>.npz (its --key array, e.g. l14_img) and the same-name .parquet (uid, "
        "url, text -> caption) into the clip-retrieval layout with the recipe you name, one shard at a time "
        "(a rerun skips the shards whose files are unchanged). Refused with the file and row named: NaN rows, "
        "vectors that are not unit length, dimensions that change between shards, row counts that differ from the "
        "metadata.",
    )
    datacomp.add_argument("source", help="folder of DataComp shards (<shard>.npz beside <shard>.parquet)")
    datacomp.add_argument("--out", required=True, help="output corpus folder")
    datacomp.add_argument("--recipe", required=True,
                          help="recipe.json describing how the features were made (family, model, weights, "
                          "preprocessing, dtype); scans compare only vectors of the same recipe")  # fmt: skip
    datacomp.add_argument("--key", default="l14_img", help="array to import (default l14_img; b32_img for ViT-B/32)")
    datacomp.set_defaults(run=_import_datacomp)

    fetch = commands.add_parser("fetch", help="download released perturbed sets and import them for the tasks")
    releases = fetch.add_subparsers(dest="release", required=True, metavar="RELEASE")
    mm_perturb = releases.add_parser(
        "mm-perturb",
        help="the MMStar / RealWorldQA sets released with the semantic-perturbation paper",
        description="Download the authors' TSVs at a pinned commit of jadenpark0/mm-perturb (checked against pinned "
        "SHA-256 values) and the images of its release v1.0.0 (listed by the GitHub API, resumed, checked, unpacked "
        "safely), then import each set where the tasks look for it. The originals come from lmms-eval's hub ids, or "
        "a local copy: --originals, $LMMS_CONTAM_ORIGINALS_<BENCHMARK> or the config file's originals. Mirrors: "
        "$LMMS_CONTAM_GITHUB_API, $LMMS_CONTAM_GITHUB_RAW; $GITHUB_TOKEN is sent when set. The release is "
        "unfiltered: run `lmms-contam verify` on it before trusting a negative delta.",
    )
    mm_perturb.add_argument("--benchmark", choices=["mmstar", "realworldqa", "all"], default="all")
    mm_perturb.add_argument("--out", help="folder for the sets, one subfolder per benchmark (default: "
                            "$LMMS_CONTAM_HOME/datasets, where the tasks look)")  # fmt: skip
    mm_perturb.add_argument("--originals", help=f"a local copy of the original benchmark, with one --benchmark "
                            f"{ORIGINALS_DEFAULT}")  # fmt: skip
    mm_perturb.set_defaults(run=_fetch_mm_perturb)

    perturb = commands.add_parser(
        "perturb",
        help="build a perturbed benchmark: answer swap, edit caption, Flux image edit, verification",
        description="Build counterfactual items (resumable: rerun the same command after a crash). Stages: "
        "answer swap (seeded), edit caption (a VLM over an OpenAI-compatible endpoint), image edit (Flux + Canny "
        "ControlNet, or Kontext), verification (judge + drift check). Writes <out>/data.parquet, "
        "<out>/data.manifest.json, and <out>/review.html + <out>/review.json for human review: set a candidate's "
        "decision to keep or reject there and rerun to rebuild the set. Per-item stage results stay in <out>/work.",
    )
    perturb.add_argument("benchmark", choices=["mmstar", "realworldqa", "naturalbench"])
    perturb.add_argument("--config", required=True, help="a recipe, e.g. configs/perturb/flux_canny.yaml")
    perturb.add_argument("--out", required=True, help="output folder")
    perturb.add_argument("--originals", help=f"a local copy of the benchmark {ORIGINALS_DEFAULT}")
    perturb.add_argument("--limit", type=int, help="only the first N items (for a trial run)")
    perturb.add_argument(
        "--shard",
        metavar="I/N",
        help="only every N-th item from the I-th, e.g. one process per GPU with CUDA_VISIBLE_DEVICES=I; "
        "then run once without --shard to assemble the set (no stage is repeated)",
    )
    perturb.add_argument("--push-to-hub", type=_hub_repo_id, metavar="NAMESPACE/NAME",
                         help="then push the set to this hub dataset repository (created if missing; token: "
                         "HF_TOKEN or `hf auth login`)")  # fmt: skip
    perturb.add_argument("--private", action="store_true", help="create the hub repository as private")
    _add_failure_rate_argument(perturb)
    perturb.set_defaults(run=_perturb)

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
    verify.add_argument("--config", default=str(Path(__file__).parent / "configs" / "perturb" / "flux_canny.yaml"),
                        help="a recipe whose verify section names the judge and the drift thresholds (default: "
                        "the paper's, judge o3)")  # fmt: skip
    _add_failure_rate_argument(verify)
    verify.set_defaults(run=_verify)

    push = commands.add_parser(
        "push",
        help="push a perturbed set folder to a Hugging Face hub dataset repository",
        description="Upload <folder>/data.parquet (as data/test-00000-of-00001.parquet, split test), "
        "data.manifest.json and a dataset card in one commit, after checking the set against the schema; then "
        "record the repository and commit in the local manifest. The tasks load the result by hub id: "
        "LMMS_CONTAM_DATASET_<BENCHMARK>=NAMESPACE/NAME. Token: HF_TOKEN or `hf auth login`; endpoint: HF_ENDPOINT.",
    )
    push.add_argument("folder", help="a folder written by `perturb` or `import mm-perturb`")
    push.add_argument("repo_id", type=_hub_repo_id, metavar="NAMESPACE/NAME", help="hub dataset repository")
    push.add_argument("--private", action="store_true", help="create the repository as private")
    push.set_defaults(run=_push)

    scan = commands.add_parser(
        "scan",
        help="image-only contamination rate of benchmarks against a corpus of image embeddings",
        description="Embed each benchmark's images, scan every corpus shard exactly (streaming top-k, resumable "
        "per shard) and write <out>/<benchmark>.matches.parquet (per image: best similarity, matches above the "
        "threshold, top-k ids, similarities, captions, urls) and <out>/<benchmark>.summary.json (rates over "
        "0.8-0.99). The corpus is in the clip-retrieval layout with a recipe.json naming how its vectors were "
        "made; the embedder must match it.",
    )
    scan.add_argument("--eval", type=_benchmark_list, help=f"comma-separated benchmarks among {','.join(SCANNABLE)}")
    scan.add_argument("--eval-folder", action="append", default=[], metavar="FOLDER",
                      help="also scan every image under FOLDER (ids: relative paths; output named after the "
                      "folder); repeatable")  # fmt: skip
    scan.add_argument("--eval-dataset", action="append", default=[], metavar="DATASET",
                      help="also scan a dataset's image column: a hub id, parquet file/folder or save_to_disk "
                      "folder (see --split, --image-column, --id-column); repeatable")  # fmt: skip
    scan.add_argument("--split", default="test", help="split of --eval-dataset (default test)")
    scan.add_argument("--image-column", default="image", help="image column of --eval-dataset (default image)")
    scan.add_argument("--id-column", help="id column of --eval-dataset (default: the row number)")
    scan.add_argument("--corpus", required=True, help="folder with img_emb/img_emb_N.npy, metadata/, recipe.json")
    scan.add_argument("--out", required=True, help="output folder")
    _add_embedder_arguments(scan)
    scan.add_argument("--threshold", type=float,
                      help="similarity above which an image counts as contaminated (default: the embedder's own, "
                      "0.9 for CLIP as in the paper; `lmms-contam embedders` lists them)")  # fmt: skip
    scan.add_argument("--k", type=_at_least(1), default=10, help="matches kept per eval image (default 10)")
    scan.add_argument("--originals", help=f"a local copy of the benchmark {ORIGINALS_DEFAULT}")
    scan.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="scan the corpus shards as Ray tasks: alone, on Ray's default cluster ($RAY_ADDRESS, a running "
        "local one, else a new local one); or on the cluster at ADDRESS (e.g. ray://head:10001). Shard files "
        "must be readable at the same paths on every node",
    )
    scan.add_argument("--index", nargs="?", const="", metavar="FOLDER",
                      help="search the corpus's faiss index (default <corpus>/index, from `index-corpus`) instead "
                      "of the exact scan; its candidates are re-scored exactly, but a match it never proposes is "
                      "missed, and matches above the threshold are counted among the candidates only")  # fmt: skip
    scan.add_argument("--candidates", type=_at_least(1), default=100,
                      help="rows the index proposes per eval image (default 100)")  # fmt: skip
    scan.add_argument("--nprobe", type=_at_least(1), default=32, help="IVF lists searched (default 32)")
    scan.add_argument("--precision", choices=["auto", *PRECISIONS], default="auto",
                      help="precision of the scan's matrix products: int8 is a CPU's fast path (oneDNN), "
                      "float16/bfloat16 a GPU's; every entry that could enter the top-k or cross the threshold is "
                      "recomputed exactly, so every mode gives the same results (default auto: int8 on a CPU "
                      "where torch has oneDNN, else float32; float16 with --scan-device)")  # fmt: skip
    scan.add_argument("--scan-device", default="cpu", help="torch device for float16/bfloat16 products (e.g. cuda)")
    scan.set_defaults(run=_scan)

    index = commands.add_parser(
        "index-corpus",
        help="build a faiss index of an embedded corpus, for repeated `scan --index` runs",
        description="Trains the index on an even sample of the corpus (at most 200000 vectors) and adds every "
        "shard in order, so the index's ids are the corpus's global row ids. Writes <corpus>/index/faiss.index "
        "and index.json (factory, recipe, shards); `scan --index` refuses an index of another corpus state.",
    )
    index.add_argument("corpus", help="an embedded corpus folder (clip-retrieval layout with recipe.json)")
    index.add_argument("--factory", default="IVF1024,Flat",
                       help="faiss index_factory string (e.g. IVF4096,PQ64 or HNSW32)")  # fmt: skip
    index.add_argument("--out", help="index folder (default <corpus>/index)")
    index.set_defaults(run=_index_corpus)

    bench = commands.add_parser(
        "bench-scan",
        help="measure the scan and the embedding pipeline against baselines timed in the same run",
        description="Times the exact scan against the bare matrix products of the same shapes and faiss "
        "IndexFlatIP on the same vectors, the embedding pipeline against the model's forward on pre-decoded "
        "tensors, embed-once + scan against the per-pair recipe (extrapolated from a few pairs), and peak "
        "memory for a 4x larger memory-mapped corpus. Prints measured figures and their ratios.",
    )
    bench.add_argument("--eval", type=_at_least(1), default=5000, help="eval vectors (default 5000)")
    bench.add_argument("--corpus", type=_at_least(1), default=100_000, help="corpus vectors (default 100000)")
    bench.add_argument("--dim", type=_at_least(1), default=768, help="vector dimension (default 768, ViT-L/14)")
    bench.add_argument("--shards", type=_at_least(1), default=4, help="corpus shards (default 4)")
    bench.add_argument("--k", type=_at_least(1), default=10, help="top-k (default 10)")
    bench.add_argument("--images", type=_at_least(2), default=64, help="images for the embedding figures")
    bench.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                       help="how the corpus shards are stored (default float16, as LAION's dumps)")  # fmt: skip
    bench.add_argument("--json", help="also write the figures as JSON here")
    _add_embedder_arguments(bench, default="efficientnet-lite0")
    bench.set_defaults(run=_bench_scan)

    corpus = commands.add_parser(
        "embed-corpus",
        help="embed a corpus of images (folder, webdataset tars, parquet) for `scan`",
        description="Embed every image of a folder (captions from .txt/.json sidecars), webdataset tar shards "
        "(image + .txt/.json per key) or parquet files (an image column of bytes, caption and url columns) into "
        "the clip-retrieval layout `scan --corpus` reads: img_emb/, metadata/ and recipe.json. Resumable per "
        "shard; undecodable images are skipped and listed with their reason in <out>/skipped/.",
    )
    corpus.add_argument("source", help="a folder, a .tar or .parquet file, or a folder of them")
    corpus.add_argument("--out", required=True, help="output corpus folder")
    _add_embedder_arguments(corpus)
    corpus.add_argument("--shard-size", type=int, default=100_000, help="source images per shard (default 100000)")
    corpus.add_argument("--image-column", default="image", help="parquet column holding the images (default image)")
    corpus.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                        help="embed with Ray Data on a pool of embedder actors: alone, on Ray's default cluster; "
                        "or on the cluster at ADDRESS")  # fmt: skip
    corpus.add_argument("--actors", type=_at_least(1), default=1, help="embedder actors with --ray (default 1)")
    corpus.add_argument("--gpus-per-actor", type=float, default=0.0, help="GPUs per actor with --ray (default 0)")
    corpus.set_defaults(run=_embed_corpus)

    embedders = commands.add_parser(
        "embedders",
        help="list the named embedders (--embedder of scan, embed-corpus, bench-scan) and their thresholds",
        description="Each named embedder is a file in the package's configs/embedders/: family, model, weights "
        "and the cosine above which two images count as the same (cosines of different models live on "
        "different scales). A config file of the same form can be given to --embedder.",
    )
    embedders.set_defaults(run=_embedders)

    judge = commands.add_parser(
        "judge",
        help="image-text contamination rate: is a sample's answer in its matched corpus captions?",
        description="For each sample of a scanned benchmark, take the captions of its corpus matches above "
        "the scan's threshold (top-k), run a deterministic n-gram pre-filter (answer words in a caption), "
        "then ask an LLM over any OpenAI-compatible endpoint whether the captions give the answer away "
        "(JSON-schema output, temperature 0, fixed seed, cached). Writes <scans>/<benchmark>.judge.parquet "
        "and .judge.json. The API key comes from the environment variable named by --api-key-env.",
    )
    judge.add_argument("scans", help="the output folder of `lmms-contam scan`")
    judge.add_argument("--benchmark", required=True, choices=SCANNABLE, help="a scanned benchmark")
    judge.add_argument("--originals", help=f"the local copy of the benchmark the scan used {ORIGINALS_DEFAULT}")
    judge.add_argument("--model", default="gpt-4o", help="judge model (default gpt-4o)")
    judge.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL, else OpenAI)")
    judge.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    judge.add_argument("--template", help="prompt template (default configs/judge/caption_judge.txt)")
    judge.add_argument("--structured-output", action=argparse.BooleanOptionalAction, default=True,
                       help="ask for JSON-schema output (turn off for servers without it)")  # fmt: skip
    judge.add_argument("--threshold", type=float, help="similarity above which a match counts (default: the scan's)")
    judge.add_argument("--top-k", type=int, help="captions per sample at most (default: the scan's k)")
    judge.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    agreement = judge.add_mutually_exclusive_group()
    agreement.add_argument("--second-model", help="judge again with this model and report the agreement rate")
    agreement.add_argument("--judge-twice", action="store_true", help="judge again with another seed, for agreement")
    judge.add_argument("--prefilter-only", action="store_true", help="the n-gram pre-filter alone, no API calls")
    _add_failure_rate_argument(judge)
    judge.set_defaults(run=_judge)

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
    demo.add_argument("--items", type=_at_least(100), help="test items (default 500; fewer make the verdicts noisy)")
    demo.add_argument("--flaws", action="store_true",
                      help="the flaw study in small instead: flaw rates 0 and 0.4, each set before and after "
                      "`lmms-contam verify` (the same models; a few minutes more)")  # fmt: skip
    demo.set_defaults(run=_experiment)

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
    full.add_argument("--flaws", action="store_true",
                      help="the flaw study instead: how many flawed counterfactuals make a clean model look "
                      "contaminated, and whether `lmms-contam verify` prevents it. Flaw rates 0, 0.1, 0.2 and 0.4; "
                      "the clean, control and 30-epoch models of every seed, each evaluated by lmms-eval on every "
                      "set before and after verification; writes flaws.json")  # fmt: skip
    full.set_defaults(run=_experiment)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
