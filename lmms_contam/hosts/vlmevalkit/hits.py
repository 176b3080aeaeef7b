"""VLMEvalKit's `hit` column recomputed with its own answer matching, where the inputs allow it.

A judged row carries the reply, the options and the gold; VLMEvalKit's rules (`can_infer`) decide most replies,
and an LLM judge only those the rules cannot. Every row the rules decide is matched again here with
VLMEvalKit's own function and its hit must agree (a hit copied from another run, or edited, is refused); the
rows an LLM judged cannot be rechecked and are named. Without VLMEvalKit installed here, nothing can be, and
the report says so.
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable
from contextlib import contextmanager

from lmms_contam.hosts.vlmevalkit.result_files import ResultFile
from lmms_contam.hosts.vlmevalkit.row_content import cell_text
from lmms_contam.report.inputs import ReportInputError

EXACT_MATCHING = "exact_matching"
VERBOSE = "VERBOSE"  # VLMEvalKit's matching reads it: set, it refuses some replies naming "A" among many words


@contextmanager
def _verbose(value: str | None):
    kept = os.environ.get(VERBOSE)
    if value is None:
        os.environ.pop(VERBOSE, None)
    else:
        os.environ[VERBOSE] = value
    try:
        yield
    finally:
        if kept is None:
            os.environ.pop(VERBOSE, None)
        else:
            os.environ[VERBOSE] = kept


def _inferred(can_infer: Callable, reply: str, choices: dict[str, str]) -> set:
    """What VLMEvalKit's rules make of the reply, with and without $VERBOSE (which the run may have had set)."""
    found = set()
    for value in (None, "1"):
        with _verbose(value):
            found.add(can_infer(reply, choices))
    return found


def _vlmevalkit_can_infer() -> Callable | None:
    """VLMEvalKit's matching, imported without its package's side effect (it turns autograd off process-wide)."""
    import torch

    grad_enabled = torch.is_grad_enabled()
    try:
        from vlmeval.utils.matching_util import can_infer
    except ImportError:
        return None
    finally:
        torch.set_grad_enabled(grad_enabled)
    return can_infer


def rechecked(result: ResultFile) -> str | None:
    """Refuse a row whose hit VLMEvalKit's own matching contradicts; return what could not be rechecked."""
    can_infer = _vlmevalkit_can_infer()
    if can_infer is None:
        return f"{result.path.name}: its hits are VLMEvalKit's, unchecked (VLMEvalKit is not installed here)"
    unchecked = 0
    for number, row in enumerate(result.table.to_dict("records"), 2):
        choices = {c: cell_text(row[c]) for c in string.ascii_uppercase if c in row and cell_text(row[c])}
        inferred = _inferred(can_infer, cell_text(row["prediction"]), choices)
        if not all(inferred) and result.judge != EXACT_MATCHING:
            unchecked += 1  # an LLM judge matched it (under one setting or both)
            continue
        possible = {int(found == cell_text(row["answer"])) for found in inferred}
        expected = possible.pop() if len(possible) == 1 else int(cell_text(row["hit"]))
        if int(cell_text(row["hit"])) != expected:
            raise ReportInputError(
                f"{result.path}: row {number} (index {cell_text(row['index'])}): hit {cell_text(row['hit'])}, but "
                f"VLMEvalKit's own matching of the reply {cell_text(row['prediction'])[:60]!r} against gold "
                f"{cell_text(row['answer'])!r} gives {expected}: the hit is not this reply's (copied from another "
                "run, or edited)"
            )
    if not unchecked:
        return None
    return f"{result.path.name}: {unchecked} of {len(result.table)} hits are the LLM judge's, unchecked"
