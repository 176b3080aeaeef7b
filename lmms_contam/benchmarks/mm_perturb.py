"""Import the perturbed sets released with the semantic-perturbation paper (VLMEvalKit TSVs + images).

The release holds, per benchmark, a TSV (index, question, answer, A-D, ..., image_path) whose
`answer` is the gold for the image the row points to, and a folder of images. The original
answers and images are not in it: they come from the original benchmark, joined on `index`.
Real quirks are taken as they are and counted: answers that are not an option letter, rows that
point at the unedited original image, empty trailing options, absolute paths from the authors'
machine (mapped onto the user's folder by their last folder and file name). Damage is refused
with the file and row named: a TSV cut short, a row without index, answer or image path, an
image that does not decode.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pandas as pd
from PIL import Image

from lmms_contam.atomic import atomic_path
from lmms_contam.imaging import decoding_error, strict_decoding
from lmms_contam.items import Item
from lmms_contam.letters import option_letters
from lmms_contam.registry.specs import released, spec
from lmms_contam.schema import SCHEMA_VERSION, PerturbedSetError, listed_options, manifest_beside, write_parquet

REALWORLDQA_INSTRUCTION = "Please answer directly with only the letter of the correct option and nothing else."
REQUIRED = ("index", "question", "answer", "A", "B", "image_path")


@dataclass
class ImportSummary:
    benchmark: str
    rows: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "rows": self.rows, "kept": self.kept, "skipped": dict(self.skipped)}


def benchmark_from_name(tsv: str | Path) -> str | None:
    name = Path(tsv).name.lower()
    return next((b for b in released() if name.startswith(b)), None)


def read_tsv(path: str | Path) -> pd.DataFrame:
    """The TSV as strings, empty cells kept empty (VLMEvalKit quotes multi-line questions)."""
    data = Path(path).read_bytes()
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise PerturbedSetError(f"{path}: line {line} holds a NUL byte: a damaged file, not text")
    try:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError as exc:
        raise PerturbedSetError(f"{path}: empty file (no header line)") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise PerturbedSetError(f"{path}: not a readable TSV ({exc})") from exc
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise PerturbedSetError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(table.columns)}")
    if not data.endswith(b"\n"):
        raise PerturbedSetError(f"{path}: the last line has no line end: a truncated file? (the release's end in one)")
    for row, values in enumerate(table[["index", "answer", "image_path"]].itertuples(index=False), 1):
        empty = [name for name, value in zip(("index", "answer", "image_path"), values, strict=True) if not value]
        if empty:
            raise PerturbedSetError(f"{path}: data row {row} (index {values[0] or '?'}): empty {', '.join(empty)}")
    first_row: dict[str, int] = {}
    for row, index in enumerate(table["index"], 1):  # " 3" and "3" are one index: the importer strips both
        if index.strip() in first_row:
            raise PerturbedSetError(
                f"{path}: data row {row} repeats index {index.strip()!r} of data row {first_row[index.strip()]}"
            )
        first_row[index.strip()] = row
    return table


def local_image(image_path: str, roots: Sequence[Path]) -> Path:
    """The authors' absolute path mapped onto the user's folders (last folder + file name, else file name),
    in the first folder that has it; the first folder's path when none does."""
    parts = PurePosixPath(image_path).parts
    candidates = [path for root in roots for path in (root.joinpath(*parts[-2:]), root / parts[-1])]
    return next((path for path in candidates if path.is_file()), candidates[0])


def row_options(row: pd.Series) -> list[str]:
    """Option texts A, B, ... up to the last non-empty one."""
    options = [row.get(letter, "") for letter in option_letters(26) if letter in row.index]
    while options and not options[-1].strip():
        options.pop()
    return options


def _original_letter(original: Item, options: list[str]) -> str | None:
    """The original gold as a letter of the release's options; None if they cannot be matched."""
    letters = option_letters(len(options))
    if original.options:
        return original.answer if list(original.options) == options else None
    # RealWorldQA's open-ended items, which the authors turned into multiple choice.
    wanted = original.answer.strip().rstrip(".").lower()
    matches = [letter for letter, text in zip(letters, options, strict=True) if text.strip().lower() == wanted]
    return matches[0] if len(matches) == 1 else None


def _question(original: Item, row: pd.Series, options: list[str]) -> str:
    """The built-in task's prompt text: the original's own when it lists the options, else RealWorldQA's form."""
    if original.options:
        return original.question
    return f"{row['question'].strip()}\n{listed_options(options)}\n{REALWORLDQA_INSTRUCTION}"


def _require_image(path: Path, row: str) -> None:
    """A damaged image in the archive (a broken download or extraction) is refused, naming file and row."""
    try:
        with strict_decoding(), Image.open(path) as image:
            image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise PerturbedSetError(f"{path} ({row}): unreadable image ({decoding_error(exc)})") from exc


def convert(
    benchmark: str,
    table: pd.DataFrame,
    images: Sequence[Path],
    originals: dict[str, Item],
    keep: set[str] | None,
    source: str,
) -> tuple[list[dict], ImportSummary]:
    summary = ImportSummary(benchmark, rows=len(table))
    provenance_base = {"source": "mm-perturb release (Park et al., 2025)", "tsv": source}
    rows = []
    for number, (_, row) in enumerate(table.iterrows(), 1):
        index = row["index"].strip()
        reason = None
        options = row_options(row)
        original = originals.get(index)
        image_path = local_image(row["image_path"], images)
        if keep is not None and index not in keep:
            reason = "not in the keep-list"
        elif original is None:
            reason = "index not in the original benchmark"
        # The release keeps each benchmark's original images in a folder named as the papers write it.
        elif PurePosixPath(row["image_path"]).parent.name == spec(benchmark).label:
            reason = "points at the unedited original image"
        elif row["answer"].strip() not in option_letters(len(options)):
            reason = "answer is not an option letter"
        elif (original_answer := _original_letter(original, options)) is None:
            reason = "options differ from the original benchmark's"
        elif row["answer"].strip() == original_answer:
            reason = "answer unchanged"
        elif not image_path.is_file():
            reason = "image file missing"
        else:
            _require_image(image_path, f"{source} data row {number} (index {index})")
        if reason:
            summary.skipped[reason] += 1
            continue
        rows.append(
            {
                "item_id": f"{benchmark}-mmperturb-{index}",
                "original_id": index,
                "benchmark": benchmark,
                "question": _question(original, row, options),
                "options": options,
                "original_answer": original_answer,
                "new_answer": row["answer"].strip(),
                "original_image": original.image,
                "image": {"bytes": image_path.read_bytes(), "path": None},
                "provenance": json.dumps({**provenance_base, "image_path": row["image_path"]}),
                "schema_version": SCHEMA_VERSION,
                **original.extra,
            }
        )
    summary.kept = len(rows)
    return rows, summary


def read_keep_list(path: str | Path) -> set[str]:
    """One index per line (blank lines and # comments ignored)."""
    lines = Path(path).read_text().splitlines()
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


def import_release(
    benchmark: str,
    tsv: str | Path,
    images: str | Path | Sequence[Path],
    originals: Iterable[Item],
    out: str | Path,
    keep: str | Path | None = None,
) -> ImportSummary:
    """Write the set (parquet, schema v1) and a manifest with the counts beside it. `images` is the release's
    image folder, or several (one per archive): each row's image is looked for in all of them."""
    if benchmark not in released():
        raise PerturbedSetError(f"the mm-perturb release has no {benchmark} set; it has {', '.join(released())}")
    images = [Path(images)] if isinstance(images, str | Path) else [Path(folder) for folder in images]
    for folder in images:
        if not folder.is_dir():
            raise PerturbedSetError(f"{folder}: image folder not found")
    table = read_tsv(tsv)
    by_id = {item.original_id: item for item in originals if isinstance(item, Item)}
    rows, summary = convert(benchmark, table, images, by_id, read_keep_list(keep) if keep else None, Path(tsv).name)
    if not rows:
        raise PerturbedSetError(f"{tsv}: no row could be imported ({dict(summary.skipped)})")
    out = Path(out)
    target = out / "data.parquet" if out.suffix != ".parquet" else out
    write_parquet(rows, benchmark, target)
    manifest = {
        "kind": "lmms-contam import mm-perturb",
        "schema_version": SCHEMA_VERSION,
        "tsv": str(Path(tsv).resolve()),
        "tsv_sha256": hashlib.sha256(Path(tsv).read_bytes()).hexdigest(),
        "images": [str(folder.resolve()) for folder in images],
        "keep_list": str(Path(keep).resolve()) if keep else None,
        **summary.as_dict(),
        "verification": {
            "verified": keep is not None,
            "kept": summary.kept,
            "of": summary.rows,
            "by": f"the keep-list {Path(keep).name}" if keep else "none: the authors' release is unfiltered",
        },
    }
    with atomic_path(manifest_beside(target)) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    return summary
