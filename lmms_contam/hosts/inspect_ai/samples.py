"""The versions of a set's items (versions.item_versions) as inspect-ai samples, one per version.

Each sample shows the image (a data URI of the set's own bytes; none where a detector withholds it), the
question without the options it lists, and the options as the sample's choices in the version's order: inspect's
`multiple_choice()` solver writes its own prompt around them ("A) ..." lines, a reply of the form "ANSWER: X").
The record the report needs (item, version, gold, stratum, the set's manifest) is the sample's metadata; the
sample's id is the item's and the version's.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText
from PIL import Image

from lmms_contam.detectors.options import question_stem
from lmms_contam.records import ContamRecord
from lmms_contam.registry.specs import SPECS
from lmms_contam.versions import NO_IMAGE, Version, item_versions

RECORD = "contam"  # the metadata key holding the record
HINT_COLUMN = "hint"  # a set column some benchmarks carry (ScienceQA's context): shown before the question


def _data_uri(image: dict) -> str:
    """The set's own bytes, as they are: the model sees the pixels the set holds, not a re-encoding."""
    data = image["bytes"] if image.get("bytes") else Path(image["path"]).read_bytes()
    kind = (Image.open(io.BytesIO(data)).format or "png").lower()
    return f"data:image/{kind};base64," + base64.b64encode(data).decode("ascii")


def asked_text(benchmark: str, row: dict) -> str:
    """The question as the sample asks it: the benchmark's context first where the set has one."""
    stem = question_stem(benchmark, row["question"])
    hint = str(row.get(HINT_COLUMN) or "").strip()
    return f"Hint: {hint}\n{stem}" if hint else stem


def _record(benchmark: str, row: dict, version: Version, set_manifest: str | None) -> dict:
    """The record the report reads back, as every host logs it (records.ContamRecord), less the correctness that
    the reader computes from the reply."""
    record = ContamRecord(
        benchmark=benchmark,
        item_id=row["item_id"],
        original_id=row["original_id"],
        variant=version.variant,
        correct=0,
        n_options=len(row["options"]),
        gold=version.gold,
        original_gold=row["original_answer"],
        stratum=SPECS[benchmark].stratum(row),
        set_manifest=set_manifest,
        text_only_input="none" if version.image is NO_IMAGE else None,
    ).as_logged()
    del record["correct"]
    return record


def version_sample(benchmark: str, row: dict, version: Version, set_manifest: str | None, image_uri: str) -> Sample:
    options = list(row["options"])
    shown = options if version.order is None else [options[i] for i in version.order]
    content: list = [] if version.image is NO_IMAGE else [ContentImage(image=image_uri)]
    content.append(ContentText(text=asked_text(benchmark, row)))
    record = _record(benchmark, row, version, set_manifest)
    return Sample(
        input=[ChatMessageUser(content=content)],
        choices=shown,
        target=version.gold,
        id=f"{row['item_id']}:{version.variant}",
        metadata={RECORD: record},
    )


def item_samples(
    benchmark: str, family: str, row: dict, set_manifest: str | None, rotate_all: bool = False
) -> list[Sample]:
    versions = item_versions(benchmark, family, row, rotate_all)
    # Each image once per item, however many versions show it (CircularEval's four rotations show one).
    uris = {v.image: _data_uri(row[v.image]) for v in versions if v.image is not NO_IMAGE}
    return [version_sample(benchmark, row, v, set_manifest, uris.get(v.image, "")) for v in versions]
