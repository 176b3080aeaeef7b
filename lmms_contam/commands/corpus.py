"""Commands over image corpora: embedding, indexing, scanning, benchmarking the scan."""

from __future__ import annotations

import argparse

from lmms_contam.commands.common import ORIGINALS_DEFAULT, at_least, stop
from lmms_contam.registry.specs import scannable


def _benchmark_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in scannable()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown benchmark(s) {unknown or text!r}; choose among {scannable()}")
    return names


def add_embedder_arguments(command: argparse.ArgumentParser, default: str = "clip-vit-l-14") -> None:
    """How images become vectors; `scan` and `embed-corpus` must agree (their recipes are compared)."""
    command.add_argument(
        "--embedder",
        default=default,
        help="a named embedder (`lmms-contam embedders` lists them; clip-vit-l-14 is the paper's), "
        "an embedder config file (.yaml), open_clip:MODEL/PRETRAINED or hf_clip:MODEL_ID_OR_FOLDER; "
        f"default {default}",
    )
    command.add_argument("--device", default="cpu", help="torch device for the embedder")


def _embedders(_args: argparse.Namespace) -> int:
    from lmms_contam.corpus.embedder_configs import CONFIGS, named_embedders

    for config in named_embedders():
        model = " ".join(part for part in (config.model, config.weights) if part)
        print(f"{config.name:20} {config.family:18} threshold {config.threshold:<6} {model or '-':40} {config.about}")
    print(f"\n(configs in {CONFIGS}; --embedder also takes a config file of your own in the same form)")
    return 0


def _embed_corpus(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.embedder_configs import embedder_config
    from lmms_contam.corpus.ingest import embed_corpus

    try:
        if args.ray:
            from lmms_contam.corpus.runners import make_runner

            make_runner(args.ray)  # connects to (or starts) the cluster first: an unreachable one fails in seconds
        config = embedder_config(args.embedder)
        embedder, engine = config.build(args.device), None
        if args.ray:
            from lmms_contam.corpus.ray_embed import RayDataEmbedding

            engine = RayDataEmbedding(
                config=config,
                preparer=embedder.preparer,
                device=args.device,
                actors=args.actors,
                gpus=args.gpus_per_actor,
                batch_size=embedder.batch_size,
            )
        summary = embed_corpus(
            args.source, args.out, embedder, shard_size=args.shard_size, image_column=args.image_column, engine=engine
        )
    except (ValueError, FileNotFoundError) as exc:
        return stop("embed-corpus", exc)
    print(
        f"{summary.vectors} images embedded into {summary.shards} shard(s) in {args.out} "
        f"({summary.shards_reused} reused); {summary.skipped} skipped (reasons in {args.out}/skipped/)"
    )
    return 0


def _index_corpus(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.index import build_index

    try:
        folder = build_index(args.corpus, args.factory, args.out)
    except (ValueError, RuntimeError, FileNotFoundError) as exc:  # faiss raises RuntimeError on bad factories
        return stop("index-corpus", exc)
    print(f"{args.factory} index of {args.corpus} -> {folder}")
    return 0


def _scan(args: argparse.Namespace) -> int:
    from lmms_contam.corpus.embedder_configs import embedder_config
    from lmms_contam.corpus.eval_sources import eval_sources
    from lmms_contam.corpus.runners import ClusterWithoutCpu, make_runner
    from lmms_contam.corpus.scan_job import scan_source
    from lmms_contam.set_locations import originals_source

    if args.originals and len(args.eval or []) != 1:
        return stop("scan", "--originals is a local copy of one benchmark; give exactly one --eval")
    try:
        runner = make_runner(args.ray)  # first: an unreachable cluster fails in seconds, before any model loads
        sources = eval_sources(
            {b: originals_source(b, args.originals) for b in args.eval or []},
            args.eval_folder,
            args.eval_dataset,
            args.split,
            args.image_column,
            args.id_column,
        )
        config = embedder_config(args.embedder)
        embedder = config.build(args.device)
        threshold = config.threshold if args.threshold is None else args.threshold
        index = None
        if args.index is not None:
            from lmms_contam.corpus.index import IndexSettings

            index = IndexSettings(args.index or None, args.candidates, args.nprobe)
        for source in sources:
            summary = scan_source(
                source,
                args.corpus,
                args.out,
                embedder,
                threshold,
                k=args.k,
                runner=runner,
                index=index,
                precision=args.precision,
                scan_device=args.scan_device,
            )
            print(
                f"{source.name}: image-only contamination rate {summary.image_only_rate:.3f} "
                f"(similarity > {summary.threshold}, {summary.images} images, "
                f"{summary.corpus_rows} corpus rows)"
            )
    except (ValueError, FileNotFoundError, ClusterWithoutCpu) as exc:
        return stop("scan", exc)
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_embed_corpus(commands)
    _add_embedders(commands)
    _add_index_corpus(commands)
    _add_scan(commands)


def _add_embed_corpus(commands: argparse._SubParsersAction) -> None:
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
    add_embedder_arguments(corpus)
    corpus.add_argument("--shard-size", type=int, default=100_000, help="source images per shard (default 100000)")
    corpus.add_argument("--image-column", default="image", help="parquet column holding the images (default image)")
    corpus.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="embed with Ray Data on a pool of embedder actors: alone, on Ray's default cluster; "
        "or on the cluster at ADDRESS (refused within 10 s when nothing answers there)",
    )
    corpus.add_argument("--actors", type=at_least(1), default=1, help="embedder actors with --ray (default 1)")
    corpus.add_argument("--gpus-per-actor", type=float, default=0.0, help="GPUs per actor with --ray (default 0)")
    corpus.set_defaults(run=_embed_corpus)


def _add_embedders(commands: argparse._SubParsersAction) -> None:
    embedders = commands.add_parser(
        "embedders",
        help="list the named embedders (--embedder of scan, embed-corpus, bench-scan) and their thresholds",
        description="Each named embedder is a file in the package's configs/embedders/: family, model, weights "
        "and the cosine above which two images count as the same (cosines of different models live on "
        "different scales). A config file of the same form can be given to --embedder.",
    )
    embedders.set_defaults(run=_embedders)


def _add_index_corpus(commands: argparse._SubParsersAction) -> None:
    index = commands.add_parser(
        "index-corpus",
        help="build a faiss index of an embedded corpus, for repeated `scan --index` runs",
        description="Trains the index on an even sample of the corpus (at most 200000 vectors) and adds every "
        "shard in order, so the index's ids are the corpus's global row ids. Writes <corpus>/index/faiss.index "
        "and index.json (factory, recipe, shards); `scan --index` refuses an index of another corpus state.",
    )
    index.add_argument("corpus", help="an embedded corpus folder (clip-retrieval layout with recipe.json)")
    index.add_argument(
        "--factory", default="IVF1024,Flat", help="faiss index_factory string (e.g. IVF4096,PQ64 or HNSW32)"
    )
    index.add_argument("--out", help="index folder (default <corpus>/index)")
    index.set_defaults(run=_index_corpus)


def _add_scan(commands: argparse._SubParsersAction) -> None:
    scan = commands.add_parser(
        "scan",
        help="image-only contamination rate of benchmarks against a corpus of image embeddings",
        description="Embed each benchmark's images, scan every corpus shard exactly (streaming top-k, resumable "
        "per shard) and write <out>/<benchmark>.matches.parquet (per image: best similarity, matches above the "
        "threshold, top-k ids, similarities, captions, urls) and <out>/<benchmark>.summary.json (rates over "
        "0.8-0.99). The corpus is in the clip-retrieval layout with a recipe.json naming how its vectors were "
        "made; the embedder must match it.",
    )
    scan.add_argument("--eval", type=_benchmark_list, help=f"comma-separated benchmarks among {','.join(scannable())}")
    scan.add_argument(
        "--eval-folder",
        action="append",
        default=[],
        metavar="FOLDER",
        help="also scan every image under FOLDER (ids: relative paths; output named after the folder); repeatable",
    )
    scan.add_argument(
        "--eval-dataset",
        action="append",
        default=[],
        metavar="DATASET",
        help="also scan a dataset's image column: a hub id, parquet file/folder or save_to_disk "
        "folder (see --split, --image-column, --id-column); repeatable",
    )
    scan.add_argument("--split", default="test", help="split of --eval-dataset (default test)")
    scan.add_argument("--image-column", default="image", help="image column of --eval-dataset (default image)")
    scan.add_argument("--id-column", help="id column of --eval-dataset (default: the row number)")
    scan.add_argument("--corpus", required=True, help="folder with img_emb/img_emb_N.npy, metadata/, recipe.json")
    scan.add_argument("--out", required=True, help="output folder")
    add_embedder_arguments(scan)
    scan.add_argument(
        "--threshold",
        type=float,
        help="similarity above which an image counts as contaminated (default: the embedder's own, "
        "0.9 for CLIP as in the paper; `lmms-contam embedders` lists them)",
    )
    scan.add_argument("--k", type=at_least(1), default=10, help="matches kept per eval image (default 10)")
    scan.add_argument("--originals", help=f"a local copy of the benchmark {ORIGINALS_DEFAULT}")
    _add_scan_method_arguments(scan)
    scan.set_defaults(run=_scan)


def _add_scan_method_arguments(scan: argparse.ArgumentParser) -> None:
    """How the corpus is searched: exactly (on Ray or not, at which precision) or through a faiss index."""
    from lmms_contam.corpus.scan import PRECISIONS

    scan.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="scan the corpus shards as Ray tasks: alone, on Ray's default cluster ($RAY_ADDRESS, a running "
        "local one, else a new local one); or on the cluster at ADDRESS (e.g. ray://head:10001; refused within "
        "10 s when nothing answers there). Shard files must be readable at the same paths on every node",
    )
    scan.add_argument(
        "--index",
        nargs="?",
        const="",
        metavar="FOLDER",
        help="search the corpus's faiss index (default <corpus>/index, from `index-corpus`) instead "
        "of the exact scan; its candidates are re-scored exactly, but a match it never proposes is "
        "missed, and matches above the threshold are counted among the candidates only",
    )
    scan.add_argument(
        "--candidates", type=at_least(1), default=100, help="rows the index proposes per eval image (default 100)"
    )
    scan.add_argument("--nprobe", type=at_least(1), default=32, help="IVF lists searched (default 32)")
    scan.add_argument(
        "--precision",
        choices=["auto", *PRECISIONS],
        default="auto",
        help="precision of the scan's matrix products: int8 is a CPU's fast path (oneDNN), "
        "float16/bfloat16 a GPU's; every entry that could enter the top-k or cross the threshold is "
        "recomputed exactly, so every mode gives the same results (default auto: int8 on a CPU "
        "where torch has oneDNN, else float32; float16 with --scan-device)",
    )
    scan.add_argument("--scan-device", default="cpu", help="torch device for float16/bfloat16 products (e.g. cuda)")
