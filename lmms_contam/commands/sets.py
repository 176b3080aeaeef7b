"""Commands that provide perturbed sets: where they are, fetching, importing, pushing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmms_contam.commands.common import ORIGINALS_DEFAULT, hub_repo_id, stop
from lmms_contam.registry.specs import perturbable, released

RELEASE = "the MMStar / RealWorldQA sets released with the semantic-perturbation paper"


def _tasks_dir(_args: argparse.Namespace) -> int:
    from lmms_contam.hosts.lmms_eval.registration import tasks_dir

    print(tasks_dir())
    return 0


def _generate_tasks(args: argparse.Namespace) -> int:
    from lmms_contam.hosts.lmms_eval.registration import tasks_dir
    from lmms_contam.hosts.lmms_eval.task_files import FUNCTIONS_FILE, TaskFileError, differences, write

    try:
        changed = differences(tasks_dir(), FUNCTIONS_FILE) if args.check else write(tasks_dir(), FUNCTIONS_FILE)
    except TaskFileError as exc:
        return stop("tasks generate", exc)
    for path in changed:
        print(f"{'differs' if args.check else 'written'}: {path}")
    if args.check and changed:
        print(
            "lmms-contam tasks generate: the task files are not what the registry generates; run "
            "`lmms-contam tasks generate`",
            file=sys.stderr,
        )
        return 1
    print(f"{len(changed)} file(s) {'differ' if args.check else 'written'}; tasks in {tasks_dir()}")
    return 0


def _datasets(args: argparse.Namespace) -> int:
    """Show where each benchmark's perturbed set resolves, and check it when asked; never downloads."""
    from lmms_contam.schema import PerturbedSetError
    from lmms_contam.set_locations import NotFetchedYet, load_perturbed_set, resolve

    status = 0
    for benchmark in args.benchmark or sorted(perturbable()):
        try:
            location = resolve(benchmark, fetch=False)
            line = f"{benchmark}: {location.kind} {location.value} (via {location.found_via})"
            if args.check:
                line += f", {len(load_perturbed_set(benchmark))} valid rows"
            print(line)
        except NotFetchedYet as exc:
            print(f"{benchmark}: {exc}", file=sys.stderr if args.check else sys.stdout)
            status = 1 if args.check else status
        except PerturbedSetError as exc:
            print(f"{benchmark}: {exc}", file=sys.stderr)
            status = 1
    return status


def _fetch_mm_perturb(args: argparse.Namespace) -> int:
    from lmms_contam.benchmarks.mm_perturb_release import fetch_release
    from lmms_contam.download import DownloadError
    from lmms_contam.schema import PerturbedSetError
    from lmms_contam.set_locations import default_folder, home, originals_source

    benchmarks = list(released()) if args.benchmark == "all" else [args.benchmark]
    if args.originals and len(benchmarks) > 1:
        return stop("fetch", "--originals is a local copy of one benchmark; give --benchmark")
    sets = {b: Path(args.out) / b if args.out else default_folder(b) for b in benchmarks}
    try:
        summaries = fetch_release(
            benchmarks,
            sets,
            home() / "downloads" / "mm-perturb",
            {b: originals_source(b, args.originals) for b in benchmarks},
        )
    except (DownloadError, PerturbedSetError, ValueError) as exc:
        return stop("fetch", exc)
    for benchmark, summary in summaries.items():
        print(
            f"{benchmark}: {summary.kept} of {summary.rows} released rows imported into {sets[benchmark]} "
            "(not verified: the release is unfiltered; see the README)"
        )
        for reason, count in sorted(summary.skipped.items()):
            print(f"  skipped {count}: {reason}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from lmms_contam.hosts.base import ExportRefused

    try:
        lines = args.exporter.export(args)
    except ExportRefused as exc:
        return stop("export", exc)
    print("\n".join(lines))
    return 0


def _import_mm_perturb(args: argparse.Namespace) -> int:
    from lmms_contam.benchmarks import loaders, mm_perturb
    from lmms_contam.schema import PerturbedSetError
    from lmms_contam.set_locations import default_folder, originals_source

    benchmark = args.benchmark or mm_perturb.benchmark_from_name(args.tsv)
    if benchmark is None:
        return stop("import", f"cannot tell the benchmark from {args.tsv}; pass --benchmark")
    out = Path(args.out) if args.out else default_folder(benchmark)
    try:
        originals = loaders.items(benchmark, loaders.load_rows(benchmark, originals_source(benchmark, args.originals)))
        summary = mm_perturb.import_release(benchmark, args.tsv, args.images, originals, out, keep=args.keep)
    except (PerturbedSetError, ValueError, FileNotFoundError) as exc:
        return stop("import", exc)
    print(f"{benchmark}: {summary.kept} of {summary.rows} rows imported into {out}")
    for reason, count in sorted(summary.skipped.items()):
        print(f"  skipped {count}: {reason}")
    return 0


def _import_datacomp(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.datacomp import import_datacomp

    try:
        summary = import_datacomp(args.source, args.out, args.recipe, args.key)
    except (ValueError, FileNotFoundError, TypeError) as exc:  # TypeError: a recipe.json with other fields
        return stop("import datacomp", exc)
    print(f"{summary.vectors} vectors in {summary.shards} shard(s) -> {args.out} ({summary.shards_reused} reused)")
    return 0


def push_set(folder: str, repo_id: str, private: bool, command: str) -> int:
    """Push a finished set; a failure leaves the local set as it was (complete, without a hub record)."""
    from lmms_contam.hub import push_perturbed_set

    try:
        commit = push_perturbed_set(folder, repo_id, private=private)
    except Exception as exc:  # the set's checks, the hub's answers, the network (its client's types vary by version)
        return stop(command, f"pushing {folder} to the hub dataset {repo_id} failed: {type(exc).__name__}: {exc}", 1)
    print(f"pushed to the hub: dataset {repo_id} at commit {commit}")
    return 0


def _push(args: argparse.Namespace) -> int:
    return push_set(args.folder, args.repo_id, args.private, "push")


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_tasks_dir(commands)
    _add_tasks(commands)
    _add_datasets(commands)
    _add_fetch(commands)
    _add_export(commands)
    _add_import(commands)
    _add_push(commands)


def _add_tasks_dir(commands: argparse._SubParsersAction) -> None:
    tasks_dir = commands.add_parser(
        "tasks-dir",
        help="print the folder of the plugin's task YAMLs (for lmms-eval --include_path)",
        description="Print the plugin's task folder. After `pip install lmms-contam`, lmms-eval finds the "
        "tasks by itself; `lmms-eval --include_path $(lmms-contam tasks-dir)` is the stable fallback.",
    )
    tasks_dir.set_defaults(run=_tasks_dir)


def _add_tasks(commands: argparse._SubParsersAction) -> None:
    tasks = commands.add_parser("tasks", help="the plugin's task YAMLs", description="The plugin's task YAMLs.")
    generate = tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION").add_parser(
        "generate",
        help="write every benchmark's task YAMLs from the registry",
        description="Write the task YAMLs of every benchmark in lmms_contam/registry/specs.py, and the module "
        "that names their !function targets (lmms_contam/hosts/lmms_eval/task_functions.py), from the installed "
        "lmms-eval's built-in tasks: their prompts, generation settings and metrics. The task folder is the "
        "generator's alone: files it would not write are removed. Run it after adding a benchmark or upgrading "
        "lmms-eval; the files are checked in, so lmms-eval finds them without running this.",
    )
    generate.add_argument(
        "--check", action="store_true", help="write nothing; list the files that differ and exit 1 if any do"
    )
    generate.set_defaults(run=_generate_tasks)


def _add_datasets(commands: argparse._SubParsersAction) -> None:
    sets = commands.add_parser(
        "datasets",
        help="show where each benchmark's perturbed set is found",
        description="Resolve each benchmark's perturbed set: $LMMS_CONTAM_DATASET_<BENCHMARK>, then the "
        "config file's `datasets:` entry, then $LMMS_CONTAM_HOME/datasets/<benchmark>. Downloads nothing: a set "
        "the tasks would fetch on first use (MMStar, RealWorldQA) is shown as such, with where it comes from.",
    )
    sets.add_argument("benchmark", nargs="*", help="benchmarks to show (default: all)")
    sets.add_argument("--check", action="store_true", help="also load and validate each set (decodes every image)")
    sets.set_defaults(run=_datasets)


def _add_fetch(commands: argparse._SubParsersAction) -> None:
    fetch = commands.add_parser("fetch", help="download released perturbed sets and import them for the tasks")
    releases = fetch.add_subparsers(dest="release", required=True, metavar="RELEASE")
    mm_perturb = releases.add_parser(
        "mm-perturb",
        help=RELEASE,
        description="Download the authors' TSVs at a pinned commit of jadenpark0/mm-perturb (checked against pinned "
        "SHA-256 values) and the images of its release v1.0.0 (listed by the GitHub API, resumed, checked, unpacked "
        "safely), then import each set where the tasks look for it. The originals come from lmms-eval's hub ids, or "
        "a local copy: --originals, $LMMS_CONTAM_ORIGINALS_<BENCHMARK> or the config file's originals. Mirrors: "
        "$LMMS_CONTAM_GITHUB_API, $LMMS_CONTAM_GITHUB_RAW; $GITHUB_TOKEN is sent when set. The release is "
        "unfiltered: run `lmms-contam verify` on it before trusting a negative delta.",
    )
    mm_perturb.add_argument("--benchmark", choices=[*released(), "all"], default="all")
    mm_perturb.add_argument(
        "--out",
        help="folder for the sets, one subfolder per benchmark (default: "
        "$LMMS_CONTAM_HOME/datasets, where the tasks look)",
    )
    mm_perturb.add_argument(
        "--originals", help=f"a local copy of the original benchmark, with one --benchmark {ORIGINALS_DEFAULT}"
    )
    mm_perturb.set_defaults(run=_fetch_mm_perturb)


def _add_export(commands: argparse._SubParsersAction) -> None:
    from lmms_contam.hosts.registry import HOSTS

    export = commands.add_parser("export", help="write a resolved perturbed set as another harness's dataset")
    hosts = export.add_subparsers(dest="host", required=True, metavar="HOST")
    for host in HOSTS.values():
        if host.exporter is not None:
            parser = hosts.add_parser(host.key, help=host.exporter.help, description=host.exporter.description)
            host.exporter.add_arguments(parser)
            parser.set_defaults(run=_export, exporter=host.exporter)


def _add_import(commands: argparse._SubParsersAction) -> None:
    importer = commands.add_parser("import", help="import released perturbed sets, or precomputed corpus features")
    sources = importer.add_subparsers(dest="source", required=True, metavar="SOURCE")
    release = sources.add_parser(
        "mm-perturb",
        help=RELEASE,
        description="Convert the paper authors' VLMEvalKit TSV and image folder into a perturbed set. Original "
        "answers and images come from the original benchmark (the hub id lmms-eval uses, or --originals), "
        "joined on index. Rows that cannot be used are counted by reason, never dropped silently.",
    )
    release.add_argument("--tsv", required=True, help="MMStar_pert_local.tsv or RealWorldQA_pert_local.tsv")
    release.add_argument(
        "--images", required=True, help="the release's image folder (holding MMStar_semantic_flux/ ...)"
    )
    release.add_argument("--benchmark", choices=released(), help="default: from the TSV's name")
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
    datacomp.add_argument(
        "--recipe",
        required=True,
        help="recipe.json describing how the features were made (family, model, weights, "
        "preprocessing, dtype); scans compare only vectors of the same recipe",
    )
    datacomp.add_argument("--key", default="l14_img", help="array to import (default l14_img; b32_img for ViT-B/32)")
    datacomp.set_defaults(run=_import_datacomp)


def _add_push(commands: argparse._SubParsersAction) -> None:
    push = commands.add_parser(
        "push",
        help="push a perturbed set folder to a Hugging Face hub dataset repository",
        description="Upload <folder>/data.parquet (as data/test-00000-of-00001.parquet, split test), "
        "data.manifest.json and a dataset card in one commit, after checking the set against the schema; then "
        "record the repository and commit in the local manifest. The tasks load the result by hub id: "
        "LMMS_CONTAM_DATASET_<BENCHMARK>=NAMESPACE/NAME. Token: HF_TOKEN or `hf auth login`; endpoint: HF_ENDPOINT.",
    )
    push.add_argument("folder", help="a folder written by `perturb` or `import mm-perturb`")
    push.add_argument("repo_id", type=hub_repo_id, metavar="NAMESPACE/NAME", help="hub dataset repository")
    push.add_argument("--private", action="store_true", help="create the repository as private")
    push.set_defaults(run=_push)
