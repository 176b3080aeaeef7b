"""`lmms-contam export vlmevalkit BENCHMARK`: the set the tasks resolve, as a VLMEvalKit dataset.

One TSV row per version of every kept item (versions.item_versions, as lmms-eval's tasks ask them):
a unique integer `index`, the image as base64 with a content-addressed `image_path` (VLMEvalKit caches
decoded images under that name, so a re-export of another set never shows a stale image), the
question without the options it lists, the options as columns A, B, ..., the gold letter, the
benchmark's category columns, `split` (the version, so VLMEvalKit's accuracy table gives one per version)
and the record fields the report needs (`contam_*`: item, version, stratum, the set's manifest SHA-256,
the export's size). VLMEvalKit carries every column but the image into its predictions. A manifest
beside the TSV records the source set and its verification. The text-only family has no image column:
VLMEvalKit then asks the questions alone.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import datasets
import pandas as pd
from tqdm.auto import tqdm

from lmms_contam import __version__
from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.circular import CIRCULAR
from lmms_contam.detectors.options import question_stem
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.vlmevalkit.bindings import VLMEvalKitBinding, binding, dataset_name
from lmms_contam.hosts.vlmevalkit.result_files import read_table
from lmms_contam.hosts.vlmevalkit.row_content import OPTION_COLUMN, cell_text, content_index, is_content
from lmms_contam.letters import option_letters
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED
from lmms_contam.registry.specs import SPECS
from lmms_contam.schema import IMAGE_COLUMNS, PerturbedSetError
from lmms_contam.set_locations import load_perturbed_set, manifest_path, manifest_sha256, resolve
from lmms_contam.versions import NO_IMAGE, Version, item_versions

OWN_DETECTORS = (CIRCULAR,)  # VLMEvalKit runs CircularEval itself (its MMBench datasets; hosts/vlmevalkit/circular.py)


# Why a detector that asks for an option's text (masked-option guessing) has no export.
TEXT_ANSWERS = (
    "VLMEvalKit cannot ask it: a custom dataset with options is multiple choice, whose prompt asks for a letter "
    "and whose answer matching extracts one, and a custom dataset without options is scored by VLMEvalKit's VQA "
    "metrics, not by exact match against the hidden option's text; run it with lmms-eval (*_{family} tasks)"
)


def families() -> tuple[str, ...]:
    """What the export writes: the perturbation's families and every detector VLMEvalKit does not run itself and
    can ask (multiple-choice questions answered with a letter)."""
    asked = (name for name, d in DETECTORS.items() if name not in OWN_DETECTORS and not d.scores_reply)
    return (CONTAM, PERTURBED, ORIGINAL, *asked)


LMUDATA_ENV = "LMUData"


def lmudata_folder(explicit: str | Path | None = None) -> Path:
    """VLMEvalKit's data folder: the one given, else $LMUData, else ~/LMUData (as VLMEvalKit looks)."""
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get(LMUDATA_ENV) or Path.home() / "LMUData").expanduser()


def export_manifest(tsv: Path) -> Path:
    return tsv.with_name(tsv.stem + ".contam.json")


@dataclass(frozen=True)
class Exported:
    benchmark: str
    family: str
    dataset: str  # the name VLMEvalKit runs it under: --data <dataset>
    tsv: Path
    items: int
    rows: int
    verification: dict | None  # the set's own record of how it was verified
    left_out: dict[str, str]  # item id -> why VLMEvalKit would not read it as written


def _image_bytes(value: dict) -> bytes:
    if value.get("bytes"):
        return value["bytes"]
    return Path(value["path"]).read_bytes()


def _tsv_row(benchmark: str, bound: VLMEvalKitBinding, row: dict, version: Version, set_manifest: str | None) -> dict:
    options = list(row["options"])
    shown = options if version.order is None else [options[i] for i in version.order]
    record = {
        "question": question_stem(benchmark, row["question"]),
        **dict(zip(option_letters(len(shown)), shown, strict=True)),
        "answer": version.gold,
        **({"hint": row[bound.hint]} if bound.hint else {}),
        **{column: row[field] for field, column in bound.categories},
        "split": version.variant,
        "contam_benchmark": benchmark,
        "contam_item_id": row["item_id"],
        "contam_original_id": row["original_id"],
        "contam_variant": version.variant,
        "contam_original_answer": row["original_answer"],  # what a leaderboard run of the benchmark asked
        "contam_n_options": len(options),
        "contam_stratum": SPECS[benchmark].stratum(row),
        "contam_set_manifest": set_manifest or "",
    }
    if version.image is not NO_IMAGE:
        data = _image_bytes(row[version.image])
        record["image"] = base64.b64encode(data).decode("ascii")
        record["image_path"] = f"contam-{hashlib.sha256(data).hexdigest()[:24]}.png"
    return record


def vlmevalkit_reads(tsv: Path) -> pd.DataFrame:
    """A TSV as VLMEvalKit reads it (`vlmeval.smp.load` of a .tsv: pandas' defaults, which read `None`, `NA`,
    `nan`, an empty cell and the rest of pandas' missing-value strings as missing)."""
    return pd.read_csv(tsv, sep="\t")


def _write_tsv(table: pd.DataFrame, path: Path) -> None:
    # Every text quoted: a lone carriage return splits a row for pandas' reader where the line is not quoted.
    table.to_csv(path, sep="\t", index=False, quoting=csv.QUOTE_NONNUMERIC)


def _content(table: pd.DataFrame) -> pd.DataFrame:
    return table[[c for c in table.columns if is_content(c)]]


def _content_read_back(table: pd.DataFrame, tsv: Path) -> pd.DataFrame:
    """The table's content columns as VLMEvalKit reads them back from `tsv`."""
    read = vlmevalkit_reads(tsv)
    if len(read) != len(table):
        raise PerturbedSetError(f"{tsv}: reads back as {len(read)} rows for {len(table)}: a field splits a line")
    return _content(read.reindex(columns=table.columns))


def _probed(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The content columns as VLMEvalKit would read them from the TSV, and as its xlsx result file would hold
    those (it writes them with xlsxwriter, which turns a text opening with `=` into a formula, leaves a literal
    `_x0041_` unescaped and cuts texts over 32,767 characters); None where xlsxwriter is not installed."""
    with tempfile.TemporaryDirectory(prefix="lmms-contam-export-") as folder:
        probe = Path(folder) / "probe.tsv"
        _write_tsv(_content(table), probe)
        read = _content_read_back(table, probe)
        try:
            read.to_excel(probe.with_suffix(".xlsx"), index=False, engine="xlsxwriter")
        except ImportError:
            return read, None
        return read, read_table(probe.with_suffix(".xlsx")).reindex(columns=read.columns)


def _differences(table: pd.DataFrame, read: pd.DataFrame) -> dict[str, pd.Series]:
    """Per content column, the rows VLMEvalKit would not read as written: another text, or (for what the prompt
    shows: question, hint, options, gold) a written text read as missing, which VLMEvalKit leaves out."""
    differing = {}
    for column in read.columns:
        differs = table[column].map(cell_text) != read[column].map(cell_text)
        if column in ("question", "hint", "answer") or OPTION_COLUMN.match(column):
            differs |= table[column].notna() & read[column].isna()
        differing[column] = differs
    return differing


def _unreadable_items(table: pd.DataFrame, read: pd.DataFrame, by: str) -> dict[str, str]:
    """Items a field of which VLMEvalKit would not read or keep as written, with why (`by`: what changes it):
    the prompt it builds would lack or change that field, or its result file would not say what was asked."""
    why: dict[str, str] = {}
    for column, differs in _differences(table, read).items():
        for row in differs.to_numpy().nonzero()[0]:
            seen = read[column].iat[row]
            seen = "as missing" if pd.isna(seen) else f"as {cell_text(seen)!r}"
            why.setdefault(
                str(table["contam_item_id"].iat[row]),
                f"{column} {table[column].iat[row]!r}: {by} {seen}",
            )
    return why


def _kept_rows(table: pd.DataFrame, source: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The rows of the items VLMEvalKit would read, and keep in its result file, as written; the others' ids
    with why they were left out."""
    read, kept = _probed(table)
    left_out = _unreadable_items(table, read, "VLMEvalKit's reader reads it")
    if kept is not None:
        left_out = _unreadable_items(read, kept, "VLMEvalKit's xlsx result file holds it") | left_out
    table = table[~table["contam_item_id"].isin(left_out)].reset_index(drop=True)
    if table.empty:
        raise PerturbedSetError(f"{source}: no item VLMEvalKit would read as written ({_listed(left_out)})")
    return table, left_out


def _export_table(
    benchmark: str,
    family: str,
    name: str,
    bound: VLMEvalKitBinding,
    rows: datasets.Dataset,
    set_manifest: str | None,
    source: str,
) -> tuple[pd.DataFrame, dict[str, str]]:
    """The TSV's rows (one per version of each item VLMEvalKit reads as written) and the left-out items, built
    and checked in memory so that a set that cannot be exported is refused before its TSV is written."""
    for column in IMAGE_COLUMNS:
        rows = rows.cast_column(column, datasets.Image(decode=False))
    lines = [
        _tsv_row(benchmark, bound, row, version, set_manifest)
        for row in tqdm(rows, desc=f"exporting {name}", disable=len(rows) < 200)
        for version in item_versions(benchmark, family, row)
    ]
    table = pd.DataFrame(lines)
    if table["answer"].isna().any() or (table["answer"] == "").any():
        raise PerturbedSetError(f"{source}: a version without a gold letter")
    table, left_out = _kept_rows(table, source)
    table["contam_dataset"], table["contam_family"], table["contam_rows"] = name, family, len(table)
    table.insert(0, "index", [content_index(row) for row in table.to_dict("records")])
    if table["index"].duplicated().any():
        raise PerturbedSetError(f"{source}: two rows ask the same (a repeated item id?)")
    return table, left_out


def export_set(benchmark: str, family: str = CONTAM, lmudata: str | Path | None = None) -> Exported:
    """Write `<lmudata>/<dataset>.tsv` and its manifest from the set the tasks resolve (its verified subset
    when there is one); the dataset name says the benchmark and the family. Items that VLMEvalKit's reader
    would not read as written are left out, each named with why, and the TSV is read back as VLMEvalKit reads
    it before anything is published."""
    if family in DETECTORS and DETECTORS[family].scores_reply:
        raise ValueError(f"--family {family}: {TEXT_ANSWERS.format(family=family)}")
    if family not in families():
        raise ValueError(f"--family must be one of {', '.join(families())}, got {family!r}")
    bound = binding(benchmark)
    name = dataset_name(benchmark, family)
    folder = lmudata_folder(lmudata)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--lmudata {folder}: cannot be VLMEvalKit's data folder ({exc.strerror or exc})") from exc
    location = resolve(benchmark)
    rows = load_perturbed_set(benchmark)
    set_manifest = manifest_sha256(location)
    table, left_out = _export_table(benchmark, family, name, bound, rows, set_manifest, location.value)
    tsv = folder / f"{name}.tsv"
    with atomic_path(tsv) as tmp:
        _write_tsv(table, tmp)
        if any(differs.any() for differs in _differences(table, _content_read_back(table, tmp)).values()):
            raise PerturbedSetError(f"{tsv}: does not read back as VLMEvalKit reads it; nothing exported")
    source = manifest_path(location)
    verification = (json.loads(source.read_text()).get("verification") if source else None) or None
    manifest = {
        "kind": "lmms-contam export vlmevalkit",
        "lmms_contam_version": __version__,
        "benchmark": benchmark,
        "family": family,
        "dataset": name,
        "rows": len(table),
        "items": len(rows) - len(left_out),
        "left_out": left_out,  # item id -> why VLMEvalKit would not read it as written
        "set": {
            "location": location.value,
            "found_via": location.found_via,
            "manifest_sha256": set_manifest,
            "verification": verification,
        },
        "tsv_sha256": hashlib.sha256(tsv.read_bytes()).hexdigest(),
    }
    with atomic_path(export_manifest(tsv)) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    return Exported(
        benchmark=benchmark,
        family=family,
        dataset=name,
        tsv=tsv,
        items=len(rows) - len(left_out),
        rows=len(table),
        verification=verification,
        left_out=left_out,
    )


def _listed(left_out: dict[str, str]) -> str:
    shown = "; ".join(f"{item}: {why}" for item, why in list(left_out.items())[:3])
    return shown + (f"; and {len(left_out) - 3} more" if len(left_out) > 3 else "")
