"""What an exported row asks, as one number: the row's `index` is derived from its content, so a prediction
is never scored against another question.

VLMEvalKit keys predictions by `index` alone: `--reuse` copies an earlier run's predictions into the new
run, and its evaluation takes the gold answer from the dataset by index. With indices 0..N-1, a re-export of
another set would be scored with the replies to the earlier one. An index made from the question, options,
gold, image and record fields matches only a row that asks the same thing, and the report recomputes it
from every judged row's own columns (VLMEvalKit carries them all but the image, whose digest `image_path`
holds): a row whose content is not what its index says is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping

CONTENT_COLUMNS = ("question", "hint", "answer", "image_path")  # with the options and the record fields
OPTION_COLUMN = re.compile(r"^[A-Z]$")
INDEX_BITS = 52  # exact as a float64, so the index survives VLMEvalKit's xlsx files


def cell_text(value: object) -> str:
    """A cell as text: empty for a missing cell (pandas reads an empty cell as NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


NOT_CONTENT = ("contam_set_manifest",)  # a reply to the same question in a re-made set is still its reply


def is_content(column: object) -> bool:
    """A column that says what the row asks: question, hint, gold, image, the options (single capitals) and
    the record fields (`contam_*`) but the set's manifest, which the report checks against the set apart."""
    name = str(column)
    if name in NOT_CONTENT:
        return False
    return name in CONTENT_COLUMNS or OPTION_COLUMN.match(name) is not None or name.startswith("contam_")


def content_index(row: Mapping[str, object]) -> int:
    """The index of a row asking what `row` asks: the same for the exported row and its judged copy."""
    fields = sorted((str(c), cell_text(v)) for c, v in row.items() if is_content(c) and cell_text(v))
    digest = hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode("utf-8")).hexdigest()
    return int(digest, 16) >> (256 - INDEX_BITS)
