"""`lmms-contam`: the command line. Each group of commands lives in its own module under commands/,
in the order of the work: provide a set, build or verify one, scan a corpus, judge, report; then the groups other
packages add through the `lmms_contam.commands` entry-point group (this package's laboratory: demo, experiment,
bench-scan)."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from lmms_contam import __version__
from lmms_contam.commands import corpus, judging, perturbing, reporting, sets
from lmms_contam.commands.common import stop

GROUPS = (sets, perturbing, corpus, judging, reporting)
ADDED_GROUPS = "lmms_contam.commands"  # entry points: a module's `add_commands(commands)`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmms-contam",
        description="Contamination detection for vision-language models, run inside lmms-eval.",
    )
    parser.add_argument("--version", action="version", version=f"lmms-contam {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_commands(commands)
    for added in sorted(entry_points(group=ADDED_GROUPS), key=lambda point: point.name):
        added.load()(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:  # every output is written to a temporary name first: nothing is left looking whole
        return stop(
            args.command,
            "interrupted; nothing unfinished was left looking complete, and a rerun of the "
            "same command repeats no stored work",
            130,
        )


if __name__ == "__main__":
    sys.exit(main())
