"""`lmms-contam judge`: the image-text contamination rate."""

from __future__ import annotations

import argparse
from pathlib import Path

from lmms_contam.commands.common import ORIGINALS_DEFAULT, add_failure_rate_argument, stop
from lmms_contam.registry.specs import scannable


def _print_summary(benchmark: str, summary) -> None:
    """What the judge found: the pre-filter's counts, the rate with its unjudged upper bound, the second judge's
    agreement and each model's calls and cost."""
    from lmms_contam.judge.candidates import MAX_CAPTION_CHARS

    print(
        f"{benchmark}: {summary.matched_with_captions} of {summary.samples} samples have captioned matches "
        f"above {summary.threshold}; n-gram pre-filter rate {summary.prefilter_rate:.3f}"
    )
    if summary.matched_without_captions:
        print(f"  notice: {summary.matched_without_captions} matched sample(s) have only empty captions")
    if summary.captions_truncated:
        print(
            f"  notice: {summary.captions_truncated} caption(s) longer than {MAX_CAPTION_CHARS} characters "
            "were cut to that length"
        )
    if judged := summary.judge:
        counts = judged.counts
        print(
            f"{benchmark}: image-text contamination rate {judged.image_text_rate:.3f} "
            f"({counts.get('answerable', 0)} answerable, {counts.get('not answerable', 0)} not, "
            f"{counts.get('unjudged', 0)} unjudged: up to {judged.image_text_rate_upper:.3f})"
        )
        if agreement := judged.agreement:
            print(f"  agreement with {agreement.second}: {agreement.agree} of {agreement.judged_by_both}")
        for usage in judged.usage:
            print(f"  {usage['model']}: {usage['calls']} calls, {usage['cache_hits']} cached, ${usage['cost_usd']}")


def _judge(args: argparse.Namespace) -> int:
    from lmms_contam.judge.candidates import JudgeInputError
    from lmms_contam.judge.caption_judge import DEFAULT_TEMPLATE, CaptionJudgeSettings
    from lmms_contam.judge.image_text_rate import judge_benchmark, second_judge
    from lmms_contam.llm import EndpointConfig, TooManyFailures
    from lmms_contam.set_locations import originals_source

    try:
        endpoint = second = settings = None
        if not args.prefilter_only:
            endpoint = EndpointConfig(
                model=args.model, base_url=args.base_url, api_key_env=args.api_key_env, concurrency=args.concurrency
            )
            settings = CaptionJudgeSettings.from_file(
                args.template or DEFAULT_TEMPLATE, structured_output=args.structured_output
            )
            second = second_judge(endpoint, args.second_model, args.judge_twice)
        summary = judge_benchmark(
            args.scans,
            args.benchmark,
            originals=originals_source(args.benchmark, args.originals),
            endpoint=endpoint,
            settings=settings,
            second=second,
            threshold=args.threshold,
            top_k=args.top_k,
            max_failure_rate=args.max_failure_rate,
        )
    except (JudgeInputError, ValueError, FileNotFoundError) as exc:
        return stop("judge", exc)
    except TooManyFailures as exc:
        return stop(
            "judge",
            f"the judge's calls failed, no image-text rate: {exc}. Counts in "
            f"{Path(args.scans) / (args.benchmark + '.judge.json')}; rerun once the endpoint works (verdicts "
            "already made are not asked again)",
            1,
        )
    _print_summary(args.benchmark, summary)
    print(f"-> {Path(args.scans) / (args.benchmark + '.judge.json')}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    _add_judge(commands)


def _add_judge(commands: argparse._SubParsersAction) -> None:
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
    judge.add_argument("--benchmark", required=True, choices=scannable(), help="a scanned benchmark")
    judge.add_argument("--originals", help=f"the local copy of the benchmark the scan used {ORIGINALS_DEFAULT}")
    judge.add_argument("--model", default="gpt-4o", help="judge model (default gpt-4o)")
    judge.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL, else OpenAI)")
    judge.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    judge.add_argument("--template", help="prompt template (default configs/judge/caption_judge.txt)")
    judge.add_argument(
        "--structured-output",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for JSON-schema output (turn off for servers without it)",
    )
    judge.add_argument("--threshold", type=float, help="similarity above which a match counts (default: the scan's)")
    judge.add_argument("--top-k", type=int, help="captions per sample at most (default: the scan's k)")
    judge.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    agreement = judge.add_mutually_exclusive_group()
    agreement.add_argument("--second-model", help="judge again with this model and report the agreement rate")
    agreement.add_argument("--judge-twice", action="store_true", help="judge again with another seed, for agreement")
    judge.add_argument("--prefilter-only", action="store_true", help="the n-gram pre-filter alone, no API calls")
    add_failure_rate_argument(judge)
    judge.set_defaults(run=_judge)
