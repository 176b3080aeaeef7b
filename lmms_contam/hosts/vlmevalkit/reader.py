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
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from lmms_contam.detectors.signals import DETECTORS, TEXT_ONLY
from lmms_contam.hosts.vlmevalkit.bindings import OWN_DATASETS
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
BUILTIN = "builtin"  # VLMEvalKit's own dataset of the benchmark, in leaderboard mode


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
    """One judged run of a dataset: who ran it, with which judge, and its rows."""

    path: Path
    model: str
    dataset: str
    judge: str
    benchmark: str
    family: str  # the export's family, or BUILTIN for VLMEvalKit's own dataset of the benchmark
    table: pd.DataFrame


def _checked_rows(path: Path, table: pd.DataFrame, expected_rows: set[str] | None) -> None:
    if expected_rows is not None and expected_rows != {str(len(table))}:
        raise ReportInputError(f"{path}: {len(table)} rows, but the export had {', '.join(sorted(expected_rows))} "
                               "(a truncated file, or a run with --limit?)")  # fmt: skip
    repeated = table["index"][table["index"].duplicated()].tolist()
    if repeated:
        raise ReportInputError(f"{path}: index {repeated[0]} appears more than once")
    for number, hit in enumerate(table["hit"], 2):
        if _text(hit) not in ("0", "1"):
            raise ReportInputError(f"{path}: row {number}: hit is {hit!r}, expected 0 or 1")


def _model_and_judge(path: Path, dataset: str) -> tuple[str, str]:
    model, marker, judge = RESULT_FILE.match(path.name)["stem"].partition(f"_{dataset}_")
    if not marker or not model or not judge:
        raise ReportInputError(f"{path}: not named <model>_{dataset}_<judge>_result as VLMEvalKit names its results")
    return model, judge


def read_result(path: Path) -> ResultFile | None:
    """A result file of an exported dataset, or of VLMEvalKit's own dataset of a benchmark (leaderboard mode),
    checked; None for a result file of any other dataset."""
    table = _table(path)
    if "contam_dataset" not in table.columns:
        return _own_dataset_result(path, table)
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise ReportInputError(f"{path}: lacks column(s) {', '.join(missing)} (not a result of `lmms-contam export`?)")
    names = {_text(v) for v in table["contam_dataset"]}
    if len(names) != 1:
        raise ReportInputError(f"{path}: rows of {len(names)} exported datasets ({', '.join(sorted(names))})")
    dataset = names.pop()
    model, judge = _model_and_judge(path, dataset)
    _checked_rows(path, table, {_text(v) for v in table["contam_rows"]})
    first = table.iloc[0]
    return ResultFile(path=path, model=model, dataset=dataset, judge=judge, benchmark=_text(first["contam_benchmark"]),
                      family=_text(first["contam_family"]), table=table)  # fmt: skip


def _own_dataset_result(path: Path, table: pd.DataFrame) -> ResultFile | None:
    """A run of VLMEvalKit's own dataset of a benchmark, known by the run's status.json (which names its
    model and datasets; a file name alone cannot tell MMStar from a dataset whose name starts with it)."""
    status = next((folder / "status.json" for folder in (path.parent, path.parent.parent)
                   if (folder / "status.json").is_file()), None)  # fmt: skip
    try:
        known = json.loads(status.read_text()) if status else {}
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{status}: not valid JSON ({exc})") from exc
    model = str(known.get("model_name", ""))
    for dataset in known.get("datasets") or {}:
        if dataset in OWN_DATASETS and path.name.startswith(f"{model}_{dataset}_"):
            missing = [column for column in ("index", "prediction", "hit", "answer") if column not in table.columns]
            if missing:
                raise ReportInputError(f"{path}: lacks column(s) {', '.join(missing)}")
            _checked_rows(path, table, None)
            _, judge = _model_and_judge(path, dataset)
            return ResultFile(path=path, model=model, dataset=dataset, judge=judge, benchmark=OWN_DATASETS[dataset],
                              family=BUILTIN, table=table)  # fmt: skip
    return None


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
    for result in sorted(results, key=lambda r: r.family == BUILTIN):  # a built-in run pairs with the items read
        if result.family == BUILTIN:
            _add_originals_of_own_run(entry, result)
            continue
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


def _add_originals_of_own_run(entry: ModelBenchmark, result: ResultFile) -> None:
    """Leaderboard mode: each perturbed item's original version from a run of VLMEvalKit's own dataset of the
    benchmark, by its index; the run's other items are left out."""
    by_index = {_text(row["index"]): row for row in result.table.to_dict("records")}
    for item_id, versions in entry.items.items():
        perturbed = versions[PERTURBED]
        row = by_index.get(perturbed.original_id)
        if row is None:
            raise ReportInputError(f"{result.path}: no index {perturbed.original_id}, which the perturbed run scored "
                                   f"({item_id})")  # fmt: skip
        versions[ORIGINAL] = replace(perturbed, variant=ORIGINAL, correct=int(_text(row["hit"])),
                                     gold=_text(row["answer"]), response=_text(row["prediction"]))  # fmt: skip
    entry.sources[ORIGINAL] = str(result.path)
    entry.notes = (*entry.notes, f"leaderboard mode: the originals from {result.path.name} (VLMEvalKit's own "
                   f"{result.dataset}), {len(entry.items)} of its {len(by_index)} items; both runs ask with "
                   "VLMEvalKit's multiple-choice prompt, but a model class that picks its prompt by the dataset's "
                   "name may see the two names differently")  # fmt: skip


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
        by_family = {r.family: r for r in results}
        if CONTAM in by_family:
            chosen = [by_family[CONTAM]]
        elif PERTURBED in by_family and (ORIGINAL in by_family or BUILTIN in by_family):
            chosen = [by_family[PERTURBED], by_family.get(ORIGINAL) or by_family[BUILTIN]]
        elif set(by_family) == {BUILTIN}:
            continue  # a run of VLMEvalKit's own dataset alone: nothing of ours to pair it with
        else:
            missing = ORIGINAL if PERTURBED in by_family else PERTURBED
            raise ReportInputError(f"{model}, {benchmark}: no run of the {missing} export (found only "
                                   f"{', '.join(str(r.path) for r in results)})")  # fmt: skip
        benchmarks.append(_perturbation_entry(chosen))
    return Loaded(benchmarks, detectors)
