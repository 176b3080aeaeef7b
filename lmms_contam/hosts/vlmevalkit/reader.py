"""VLMEvalKit's work dirs read into the report's records.

VLMEvalKit writes, per model and dataset, the judged predictions as
`<work_dir>/<model>/[<eval_id>/]<model>_<dataset>_<judge>_result.<xlsx|tsv|json>`: every column of the
exported TSV but the image, the reply (`prediction`), its correctness (`hit`) and how the reply was matched
to an option (`log`). Rows of an export carry `contam_*` fields; files without them (VLMEvalKit's own
datasets) are not read. Every refusal names the file: a file that cannot be read, a truncated one (fewer
rows than the export had), a row without a field the report needs.

How each reply was matched is read from its `log`: VLMEvalKit's rules first; an LLM judge only for replies
the rules could not match (with `exact_matching`, or a judge that is not working, those count as wrong); a
random option when the judge failed three times. The record of a run says which, so a verdict never rests
on answer matching nobody sees.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmms_contam.detectors.signals import DETECTORS, TEXT_ONLY
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED, VARIANTS
from lmms_contam.report.inputs import VLMEVALKIT, DetectorRun, Loaded, ModelBenchmark, ReportInputError, ScoredItem

RESULT_FILE = re.compile(r"^(?P<stem>.+)_result\.(?P<format>xlsx|tsv|json)$")
REQUIRED = (
    *("index", "prediction", "hit", "answer"),
    *("contam_dataset", "contam_family", "contam_rows", "contam_benchmark", "contam_item_id", "contam_original_id"),
    *("contam_variant", "contam_n_options"),
)
EXACT_MATCHING = "exact_matching"
UNMATCHED = "Failed in Prefetch"  # VLMEvalKit's log for a reply its rules could not match, with no judge at work
RANDOM = "Failed to predict, thus randomly generate one"  # the judge failed three times: a random option


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


def _table(path: Path) -> pd.DataFrame:
    """A result file as a table, or a refusal naming it (damaged, truncated, empty)."""
    form = RESULT_FILE.match(path.name)["format"]
    try:
        if form == "xlsx":
            table = pd.read_excel(path)
        elif form == "tsv":
            if not path.read_bytes().endswith(b"\n"):
                raise ValueError("the last line has no line end: a truncated file?")
            table = pd.read_csv(path, sep="\t")
        else:
            table = pd.DataFrame(json.loads(path.read_text()))
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, pd.errors.ParserError) as exc:
        raise ReportInputError(f"{path}: not a readable VLMEvalKit result file ({type(exc).__name__}: {exc})") from exc
    if table.empty:
        raise ReportInputError(f"{path}: no rows")
    return table


def _text(value: object) -> str:
    """A cell as text: empty for a missing cell (pandas reads an empty cell as NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class ResultFile:
    """One judged run of an exported dataset: who ran it, with which judge, and its rows."""

    path: Path
    model: str
    dataset: str
    judge: str
    table: pd.DataFrame

    @property
    def benchmark(self) -> str:
        return _text(self.table["contam_benchmark"].iloc[0])

    @property
    def family(self) -> str:
        return _text(self.table["contam_family"].iloc[0])


def read_result(path: Path) -> ResultFile | None:
    """A result file of an exported dataset, checked; None for a result file of another dataset."""
    table = _table(path)
    if "contam_dataset" not in table.columns:
        return None
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise ReportInputError(f"{path}: lacks column(s) {', '.join(missing)} (not a result of `lmms-contam export`?)")
    datasets = {_text(v) for v in table["contam_dataset"]}
    if len(datasets) != 1:
        raise ReportInputError(f"{path}: rows of {len(datasets)} exported datasets ({', '.join(sorted(datasets))})")
    dataset = datasets.pop()
    stem = RESULT_FILE.match(path.name)["stem"]
    model, marker, judge = stem.partition(f"_{dataset}_")
    if not marker or not model or not judge:
        raise ReportInputError(f"{path}: not named <model>_{dataset}_<judge>_result as VLMEvalKit names its results")
    expected = {_text(v) for v in table["contam_rows"]}
    if expected != {str(len(table))}:
        raise ReportInputError(f"{path}: {len(table)} rows, but the export {dataset} had {', '.join(sorted(expected))} "
                               "(a truncated file, or a run with --limit?)")  # fmt: skip
    repeated = table["index"][table["index"].duplicated()].tolist()
    if repeated:
        raise ReportInputError(f"{path}: index {repeated[0]} appears more than once")
    for number, hit in enumerate(table["hit"], 2):
        if _text(hit) not in ("0", "1"):
            raise ReportInputError(f"{path}: row {number}: hit is {hit!r}, expected 0 or 1")
    return ResultFile(path, model, dataset, judge, table)


def model_label(result: ResultFile) -> str:
    """The model as VLMEvalKit names it, marked as its run: the report's rows stay apart from lmms-eval's."""
    return f"{result.model} (VLMEvalKit)"


def how_matched(result: ResultFile) -> tuple[str, tuple[str, ...]]:
    """How the run's replies were judged right or wrong, and what a reader of its verdict should know."""
    kinds: Counter = Counter()
    logs = result.table["log"] if "log" in result.table.columns else [""] * len(result.table)
    for prediction, log in zip(result.table["prediction"], logs, strict=True):
        log = _text(log)
        if UNMATCHED in log:
            kinds["unmatched"] += 1
        elif RANDOM in log:
            kinds["random"] += 1
        elif log in ("", f"Match Log: {_text(prediction)}. "):
            kinds["rules"] += 1
        else:
            kinds["judge"] += 1
    total, notes = len(result.table), []
    matching = f"VLMEvalKit's answer matching, judge {result.judge}"
    if kinds["judge"]:
        matching += f" (an LLM matched {kinds['judge']} of {total} replies its rules could not)"
    if kinds["unmatched"] and result.judge != EXACT_MATCHING:
        notes.append(f"{result.path.name}: the judge {result.judge} was named but did not work: VLMEvalKit fell back "
                     f"to exact matching, and {kinds['unmatched']} of {total} replies it could not match count as "
                     "wrong")  # fmt: skip
    elif kinds["unmatched"]:
        notes.append(f"{result.path.name}: {kinds['unmatched']} of {total} replies named no option VLMEvalKit's rules "
                     "could match; with exact_matching they count as wrong")  # fmt: skip
    if kinds["random"]:
        notes.append(f"{result.path.name}: for {kinds['random']} of {total} replies the judge failed and VLMEvalKit "
                     "drew a random option")  # fmt: skip
    return matching, tuple(notes)


def _items(result: ResultFile) -> list[ScoredItem]:
    text_only = result.family == TEXT_ONLY
    items = []
    for number, row in enumerate(result.table.to_dict("records"), 2):
        try:
            items.append(ScoredItem(
                benchmark=_text(row["contam_benchmark"]), item_id=_text(row["contam_item_id"]),
                original_id=_text(row["contam_original_id"]), variant=_text(row["contam_variant"]),
                correct=int(_text(row["hit"])), n_options=int(_text(row["contam_n_options"])),
                gold=_text(row["answer"]), stratum=_text(row.get("contam_stratum")),
                set_manifest=_text(row.get("contam_set_manifest")) or None,
                text_only_input="none" if text_only else None, response=_text(row["prediction"]),
            ))  # fmt: skip
        except ValueError as exc:
            raise ReportInputError(f"{result.path}: row {number}: {exc}") from exc
    return items


def _perturbation_entry(results: list[ResultFile]) -> ModelBenchmark:
    """Both versions of every item: one run of the paired export, or one of each single-version export scored
    by the same judge."""
    first = results[0]
    judges = {r.judge for r in results}
    if len(judges) > 1:
        listed = ", ".join(f"{r.path} ({r.judge})" for r in results)
        raise ReportInputError(f"{first.model}, {first.benchmark}: the versions were scored by different judges "
                               f"({listed}); a delta needs one answer matching on both sides")  # fmt: skip
    matchings = [how_matched(r) for r in results]
    entry = ModelBenchmark(model_label(first), first.benchmark, host=VLMEVALKIT, matching=matchings[0][0],
                           notes=tuple(note for _, notes in matchings for note in notes))  # fmt: skip
    for result in results:
        for item in _items(result):
            if item.variant not in VARIANTS or (result.family != CONTAM and item.variant != result.family):
                raise ReportInputError(f"{result.path}: a {item.variant} row in the {result.family} export")
            if item.variant in entry.items[item.item_id]:
                raise ReportInputError(f"{result.path}: repeats item {item.item_id} ({item.variant})")
            entry.items[item.item_id][item.variant] = item
        for variant in VARIANTS if result.family == CONTAM else (result.family,):
            entry.sources[variant] = str(result.path)
    entry.check_pairs()
    return entry


def load(paths: Iterable[str | Path]) -> Loaded:
    """Every model's scored items per benchmark, and its detector runs, from the result files of exports."""
    by_run: dict[tuple[str, str, str], list[ResultFile]] = defaultdict(list)
    for path in result_files([Path(p) for p in paths]):
        result = read_result(path)
        if result is not None:
            by_run[(result.model, result.benchmark, result.family)].append(result)
    for (model, _, _), found in by_run.items():
        if len(found) > 1:
            files = ", ".join(str(r.path) for r in found)
            raise ReportInputError(f"{model}: {len(found)} runs of {found[0].dataset} ({files}); pass one")
    benchmarks, detectors = [], []
    pairs: dict[tuple[str, str], list[ResultFile]] = defaultdict(list)
    for (model, benchmark, family), (result,) in sorted(by_run.items()):
        if family in DETECTORS:
            detectors.append(DetectorRun(model_label(result), benchmark, family, _items(result), str(result.path),
                                         VLMEVALKIT))  # fmt: skip
        else:
            pairs[(model, benchmark)].append(result)
    for (model, benchmark), results in sorted(pairs.items()):
        families = {r.family for r in results}
        if CONTAM not in families and families != {ORIGINAL, PERTURBED}:
            missing = ({ORIGINAL, PERTURBED} - families).pop()
            raise ReportInputError(f"{model}, {benchmark}: no run of the {missing} export (found only "
                                   f"{', '.join(str(r.path) for r in results)})")  # fmt: skip
        chosen = [r for r in results if r.family == CONTAM] or results
        benchmarks.append(_perturbation_entry(chosen))
    return Loaded(benchmarks, detectors)
