"""VLMEvalKit's `hit` column recomputed with its own answer matching, where the inputs allow it.

A judged row carries the reply, the options and the gold; VLMEvalKit's rules (`can_infer`) decide most replies,
and an LLM judge only those the rules cannot. Every row the rules decide is matched again here with
VLMEvalKit's own function and its hit must agree (a hit copied from another run, or edited, is refused); the
rows an LLM judged cannot be rechecked and are named. Without VLMEvalKit installed here, nothing can be, and
the report says so.
"""

from __future__ import annotations

import string

from lmms_contam.hosts.vlmevalkit.result_files import ResultFile
from lmms_contam.hosts.vlmevalkit.row_content import cell_text
from lmms_contam.report.inputs import ReportInputError

EXACT_MATCHING = "exact_matching"


def rechecked(result: ResultFile) -> str | None:
    """Refuse a row whose hit VLMEvalKit's own matching contradicts; return what could not be rechecked."""
    try:
        from vlmeval.utils.matching_util import can_infer
    except ImportError:
        return f"{result.path.name}: its hits are VLMEvalKit's, unchecked (VLMEvalKit is not installed here)"
    unchecked = 0
    for number, row in enumerate(result.table.to_dict("records"), 2):
        choices = {c: cell_text(row[c]) for c in string.ascii_uppercase if c in row and cell_text(row[c])}
        inferred = can_infer(cell_text(row["prediction"]), choices)
        if not inferred and result.judge != EXACT_MATCHING:
            unchecked += 1  # an LLM judge matched it
            continue
        expected = int(inferred == cell_text(row["answer"]))
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
