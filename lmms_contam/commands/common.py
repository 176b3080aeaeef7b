"""What several commands share: argument types and options, and how a command refuses bad input."""

from __future__ import annotations

import argparse
import sys

ORIGINALS_DEFAULT = "(default $LMMS_CONTAM_ORIGINALS_<BENCHMARK>, the config file's originals, else lmms-eval's hub id)"


def at_least(minimum: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def rate(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def hub_repo_id(value: str) -> str:
    from lmms_contam.set_locations import HUB_ID

    if not HUB_ID.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a hub repository id (namespace/name)")
    return value


def add_failure_rate_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-failure-rate",
        type=rate,
        default=0.5,
        metavar="SHARE",
        help="exit 1 (counts kept, no result claimed) when a stage's API calls fail for more than "
        "this share of its items, or for all of them (default 0.5)",
    )


def stop(command: str, problem: object, code: int = 2) -> int:
    """One line on stderr naming the command, and its exit code: 2 for bad input or a failed
    precondition, 1 when the work itself failed (API calls, the hub)."""
    print(f"lmms-contam {command}: {problem}", file=sys.stderr)
    return code
