"""VLMEvalKit's judged result files: found under work dirs, read, checked, and told apart.

VLMEvalKit writes, per model and dataset, the judged predictions as
`<work_dir>/<model>/[<eval_id>/]<model>_<dataset>_<judge>_result.<xlsx|tsv|json>`: every column of the
exported TSV but the image, the reply (`prediction`), its correctness (`hit`) and how the reply was matched
to an option (`log`). A file is an export's when its rows carry `contam_*` fields, or a run of VLMEvalKit's
own dataset of a benchmark when the run's status.json names that dataset (leaderboard mode, and MMBench's
CircularEval); any other result file is not read. Every refusal names the file: a file that cannot be read,
a truncated one (fewer rows than the export had), a row without a field the report needs.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmms_contam.hosts.vlmevalkit.bindings import BINDINGS, own_circular, own_datasets
from lmms_contam.hosts.vlmevalkit.row_content import cell_text, content_index
from lmms_contam.report.inputs import ReportInputError

RESULT_FILE = re.compile(r"^(?P<stem>.+)_result\.(?P<format>xlsx|tsv|json)$")
REQUIRED = (
    *("index", "prediction", "hit", "answer"),
    *("contam_dataset", "contam_family", "contam_rows", "contam_benchmark", "contam_item_id", "contam_original_id"),
    *("contam_variant", "contam_n_options"),
)
BUILTIN = "builtin"  # VLMEvalKit's own dataset of the benchmark, in leaderboard mode
BUILTIN_CIRCULAR = "builtin_circular"  # VLMEvalKit's own CircularEval of the benchmark: the circular detector
# With PRINT_VANILLA=1 VLMEvalKit adds, beside a CircularEval result, each item's hit in the original order and
# every row's hit: `<model>_<dataset>_<judge>_vanilla_circ0_result`, `..._vanilla_all_result`.
VANILLA_CIRC0, VANILLA_ALL = "_vanilla_circ0", "_vanilla_all"


def is_result_file(path: Path) -> bool:
    return RESULT_FILE.match(path.name) is not None


def result_files(paths: Iterable[Path]) -> list[Path]:
    """Every judged result file under the given folders, and those named directly; each once (VLMEvalKit links
    the latest run's files into the model's folder: they are read once, resolved)."""
    found: list[Path] = []
    for path in paths:
        candidates = sorted(path.rglob("*_result.*")) if path.is_dir() else [path]
        found += [p.resolve() for p in candidates if is_result_file(p) and p.is_file()]
    return list(dict.fromkeys(found))


OOXML_ESCAPE = re.compile(r"_x([0-9A-Fa-f]{4})_")


def _ooxml_text(value: object) -> object:
    """A string cell with the characters an xlsx writer escapes as `_xHHHH_` (control characters, and `_x` that
    would read as one) put back, as the text VLMEvalKit read from the TSV; pandas' reader leaves them escaped."""
    return OOXML_ESCAPE.sub(lambda found: chr(int(found[1], 16)), value) if isinstance(value, str) else value


def read_table(path: Path) -> pd.DataFrame:
    """A result or prediction file as a table, or a refusal naming it (damaged, truncated, empty)."""
    form = path.suffix.removeprefix(".")
    try:
        if form == "xlsx":
            sheets = pd.read_excel(path, sheet_name=None)
            if len(sheets) != 1:
                raise ValueError(f"{len(sheets)} sheets ({', '.join(map(str, sheets))}); VLMEvalKit writes one")
            (table,) = sheets.values()
            table = table.map(_ooxml_text)
        elif form == "tsv":
            if not path.read_bytes().endswith(b"\n"):
                raise ValueError("the last line has no line end: a truncated file?")
            table = pd.read_csv(path, sep="\t")
        else:
            rows = json.loads(path.read_text())
            if not (isinstance(rows, list) and all(isinstance(row, dict) for row in rows)):
                raise ValueError("VLMEvalKit writes a result as a JSON list of row objects")
            table = pd.DataFrame(rows)
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, pd.errors.ParserError) as exc:
        raise ReportInputError(f"{path}: not a readable VLMEvalKit result file ({type(exc).__name__}: {exc})") from exc
    if table.empty:
        raise ReportInputError(f"{path}: no rows")
    return table


@dataclass(frozen=True)
class ResultFile:
    """One judged run of a dataset: who ran it, with which judge, and its rows."""

    path: Path
    model: str
    dataset: str
    judge: str
    benchmark: str
    family: str  # the export's family, or BUILTIN(_CIRCULAR) for VLMEvalKit's own dataset of the benchmark
    table: pd.DataFrame


def _checked_rows(path: Path, table: pd.DataFrame, expected_rows: set[str] | None) -> None:
    if expected_rows is not None and expected_rows != {str(len(table))}:
        raise ReportInputError(
            f"{path}: {len(table)} rows, but the export had {', '.join(sorted(expected_rows))} "
            "(a truncated file, or a run with --limit?)"
        )
    indices = table["index"].map(cell_text)  # as the rows are joined: 10, 10.0 and "10" are one index
    repeated = indices[indices.duplicated()].tolist()
    if repeated:
        raise ReportInputError(f"{path}: index {repeated[0]} appears more than once")
    for number, hit in enumerate(table["hit"], 2):
        if cell_text(hit) not in ("0", "1"):
            raise ReportInputError(f"{path}: row {number}: hit is {hit!r}, expected 0 or 1")


def _checked_content(path: Path, table: pd.DataFrame) -> None:
    """Every row asks what its index says (row_content): a reply to another export's row under the same index
    (VLMEvalKit's --reuse after a re-export, or a prediction file copied in) is refused."""
    for number, row in enumerate(table.to_dict("records"), 2):
        if cell_text(row["index"]) != str(content_index(row)):
            raise ReportInputError(
                f"{path}: row {number} (index {cell_text(row['index'])}, item {cell_text(row['contam_item_id'])}): "
                "its question, options, answer or image are not those its index was exported with: its "
                "prediction and hit belong to another export (VLMEvalKit's --reuse of a run of an earlier export, "
                "a result file edited, "
                "or an export by an earlier lmms-contam, whose rows were numbered 0..N-1); export again and rerun "
                "without --reuse"
            )


def _model_and_judge(path: Path, dataset: str) -> tuple[str, str]:
    model, marker, judge = RESULT_FILE.match(path.name)["stem"].partition(f"_{dataset}_")
    if not marker or not model or not judge:
        raise ReportInputError(f"{path}: not named <model>_{dataset}_<judge>_result as VLMEvalKit names its results")
    return model, judge


def is_vanilla_extra(path: Path) -> bool:
    """One of PRINT_VANILLA's extra results, read beside the CircularEval result it belongs to, not alone."""
    return RESULT_FILE.match(path.name)["stem"].endswith((VANILLA_CIRC0, VANILLA_ALL))


def named_as_export(path: Path) -> bool:
    """Whether the file's name says it is a run of an lmms-contam export (`<model>_<Name>_contam[_<family>]_...`)."""
    return any(f"_{bound.dataset}_contam_" in path.name for bound in BINDINGS.values())


def read_result(path: Path) -> ResultFile | None:
    """A result file of an exported dataset, or of VLMEvalKit's own dataset of a benchmark (leaderboard mode),
    checked; None for a result file of any other dataset. A file that is named as, or has columns of, an
    export's run is read or refused, never passed over."""
    table = read_table(path)
    if "contam_dataset" not in table.columns and not named_as_export(path):
        if any(str(column).startswith("contam_") for column in table.columns):
            raise ReportInputError(f"{path}: has lmms-contam's columns but no contam_dataset (a damaged header?)")
        return _own_dataset_result(path, table)
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise ReportInputError(f"{path}: lacks column(s) {', '.join(missing)} (not a result of `lmms-contam export`?)")
    for column in ("contam_dataset", "contam_benchmark", "contam_family"):
        values = sorted({cell_text(v) for v in table[column]})
        if len(values) != 1:
            raise ReportInputError(f"{path}: rows with {len(values)} different {column} ({', '.join(values)})")
    names = {cell_text(v) for v in table["contam_dataset"]}
    dataset = names.pop()
    model, judge = _model_and_judge(path, dataset)
    _checked_rows(path, table, {cell_text(v) for v in table["contam_rows"]})
    _checked_content(path, table)
    first = table.iloc[0]
    return ResultFile(
        path=path,
        model=model,
        dataset=dataset,
        judge=judge,
        benchmark=cell_text(first["contam_benchmark"]),
        family=cell_text(first["contam_family"]),
        table=table,
    )


def _own_dataset_result(path: Path, table: pd.DataFrame) -> ResultFile | None:
    """A run of VLMEvalKit's own dataset of a benchmark, known by the run's status.json (which names its
    model and datasets; a file name alone cannot tell MMStar from a dataset whose name starts with it).
    PRINT_VANILLA's extra results are read beside the CircularEval result they belong to, not alone."""
    status = next(
        (folder / "status.json" for folder in (path.parent, path.parent.parent) if (folder / "status.json").is_file()),
        None,
    )
    try:
        known = json.loads(status.read_text()) if status else {}
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{status}: not valid JSON ({exc})") from exc
    datasets = known.get("datasets") if isinstance(known, dict) else None
    if (
        not isinstance(known, dict)
        or not isinstance(datasets or {}, dict | list)
        or not all(isinstance(name, str) for name in datasets or {})
    ):
        raise ReportInputError(f"{status}: not VLMEvalKit's status record (an object naming its model and datasets)")
    model, of_dataset, of_circular = str(known.get("model_name", "")), own_datasets(), own_circular()
    for dataset in datasets or {}:
        own = of_dataset.get(dataset) or of_circular.get(dataset)
        if own and path.name.startswith(f"{model}_{dataset}_"):
            if is_vanilla_extra(path):
                return None
            _, judge = _model_and_judge(path, dataset)
            checked_own_table(path, table)
            family = BUILTIN if dataset in of_dataset else BUILTIN_CIRCULAR
            return ResultFile(
                path=path, model=model, dataset=dataset, judge=judge, benchmark=own, family=family, table=table
            )
    return None


def checked_own_table(path: Path, table: pd.DataFrame) -> None:
    """A result of VLMEvalKit's own dataset, with the columns the report reads and no repeated index."""
    missing = [column for column in ("index", "prediction", "hit", "answer") if column not in table.columns]
    if missing:
        raise ReportInputError(f"{path}: lacks column(s) {', '.join(missing)}")
    _checked_rows(path, table, None)
