"""VLMEvalKit's work dirs read into the report's records: each export's rows as scored items, paired by
item; VLMEvalKit's own runs of a benchmark as the originals of leaderboard mode or as the circular detector.

How each reply was matched is read from its `log`: VLMEvalKit's rules first; an LLM judge only for replies
the rules could not match (with `exact_matching`, or a judge that is not working, those count as wrong); a
random option when the judge failed three times. The record of a run says which, so a verdict never rests
on answer matching nobody sees.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from lmms_contam.detectors.circular import CIRCULAR
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.base import run_label
from lmms_contam.hosts.leaderboard import BuiltinAnswer, pair_originals, paired_note
from lmms_contam.hosts.vlmevalkit import NAME
from lmms_contam.hosts.vlmevalkit.circular import circular_records
from lmms_contam.hosts.vlmevalkit.hits import EXACT_MATCHING, rechecked
from lmms_contam.hosts.vlmevalkit.result_files import (
    BUILTIN,
    BUILTIN_CIRCULAR,
    ResultFile,
    is_vanilla_extra,
    read_result,
    result_files,
)
from lmms_contam.hosts.vlmevalkit.row_content import OPTION_COLUMN, cell_text
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED
from lmms_contam.report.inputs import (
    DetectorRun,
    Loaded,
    ModelBenchmark,
    ReportInputError,
    ScoredItem,
    same_text,
)

UNMATCHED = "Failed in Prefetch"  # VLMEvalKit's log for a reply its rules could not match, with no judge at work
RANDOM = "Failed to predict, thus randomly generate one"  # the judge failed three times: a random option


def model_label(result: ResultFile) -> str:
    """The model as VLMEvalKit names it, marked as its run: the report's rows stay apart from lmms-eval's."""
    return run_label(result.model, NAME)


def how_matched(result: ResultFile) -> tuple[str, tuple[str, ...]]:
    """How the run's replies were judged right or wrong, and what a reader of its verdict should know."""
    kinds: Counter = Counter()
    logs = result.table["log"] if "log" in result.table.columns else [""] * len(result.table)
    for prediction, log in zip(result.table["prediction"], logs, strict=True):
        log = cell_text(log)
        if UNMATCHED in log:
            kinds["unmatched"] += 1
        elif RANDOM in log:
            kinds["random"] += 1
        elif log in ("", f"Match Log: {cell_text(prediction)}. "):
            kinds["rules"] += 1
        else:
            kinds["judge"] += 1
    total, notes = len(result.table), []
    matching = f"VLMEvalKit's answer matching, judge {result.judge}"
    if kinds["judge"]:
        matching += f" (an LLM matched {kinds['judge']} of {total} replies its rules could not)"
    if kinds["unmatched"] and result.judge != EXACT_MATCHING:
        notes.append(
            f"{result.path.name}: the judge {result.judge} was named but did not work: VLMEvalKit fell back "
            f"to exact matching, and {kinds['unmatched']} of {total} replies it could not match count as "
            "wrong"
        )
    elif kinds["unmatched"]:
        notes.append(
            f"{result.path.name}: {kinds['unmatched']} of {total} replies named no option VLMEvalKit's rules "
            "could match; with exact_matching they count as wrong"
        )
    unchecked = rechecked(result)
    if unchecked:
        notes.append(unchecked)
    if kinds["random"]:
        notes.append(
            f"{result.path.name}: for {kinds['random']} of {total} replies the judge failed and VLMEvalKit "
            "drew a random option"
        )
    return matching, tuple(notes)


def _items(result: ResultFile) -> list[ScoredItem]:
    withholds_image = result.family in DETECTORS and DETECTORS[result.family].withholds_image
    items = []
    for number, row in enumerate(result.table.to_dict("records"), 2):
        try:
            items.append(
                ScoredItem(
                    benchmark=cell_text(row["contam_benchmark"]),
                    item_id=cell_text(row["contam_item_id"]),
                    original_id=cell_text(row["contam_original_id"]),
                    variant=cell_text(row["contam_variant"]),
                    correct=int(cell_text(row["hit"])),
                    n_options=int(cell_text(row["contam_n_options"])),
                    gold=cell_text(row["answer"]),
                    stratum=cell_text(row.get("contam_stratum")),
                    set_manifest=cell_text(row.get("contam_set_manifest")) or None,
                    text_only_input="none" if withholds_image else None,
                    response=cell_text(row["prediction"]),
                )
            )
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
        raise ReportInputError(
            f"{first.model}, {first.benchmark}: the versions were scored by different judges "
            f"({listed}); a delta needs one answer matching on both sides"
        )
    matchings = [how_matched(r) for r in results]
    entry = ModelBenchmark(
        model_label(first),
        first.benchmark,
        host=NAME,
        matching=matchings[0][0],
        notes=tuple(note for _, notes in matchings for note in notes),
        averages_strata=False,  # VLMEvalKit's Overall is a plain mean over the items
    )
    asked: dict[str, dict] = {}  # item id -> its perturbed row: what a built-in run's original must match
    originals: tuple[ResultFile, dict[str, dict]] | None = None  # the original export's run, when apart
    for result in sorted(results, key=lambda r: r.family == BUILTIN):  # a built-in run pairs with the items read
        if result.family == BUILTIN:
            _add_originals_of_own_run(entry, result, asked)
            continue
        rows = {cell_text(r["contam_item_id"]): r for r in result.table.to_dict("records")}
        if result.family == ORIGINAL:
            originals = (result, rows)
        else:
            asked |= rows
        entry.add_run(_items(result), result.family, str(result.path))
    if originals is not None:
        _check_same_items(entry, *originals, asked)
    entry.check_pairs()
    return entry


def _check_same_items(
    entry: ModelBenchmark, original: ResultFile, rows: dict[str, dict], asked: dict[str, dict]
) -> None:
    """Runs of the original and perturbed exports apart: each item's two rows ask the same question with the
    same options, and the original's gold is the one the perturbed row names (runs of two different sets are
    refused even where neither names a manifest)."""
    for item_id, row in rows.items():
        what = _mismatch(row, asked[item_id]) if item_id in asked else ""
        if what:
            raise ReportInputError(
                f"{entry.model}, {entry.benchmark}: item {item_id} is not the same item in {original.path} and "
                f"{entry.sources[PERTURBED]} ({what}): runs of exports of two different sets"
            )


def _options(row: dict) -> list[str]:
    return [cell_text(row[c]) for c in sorted(row) if OPTION_COLUMN.match(str(c)) and cell_text(row[c])]


def _shown(cell: object) -> bool:
    """Whether VLMEvalKit's prompt shows the cell (it leaves out only a missing one: None or NaN)."""
    return cell is not None and not (isinstance(cell, float) and math.isnan(cell))


def _mismatch(own: dict, asked: dict) -> str:
    """How a row of VLMEvalKit's own dataset differs from the set's original of the perturbed row, or ''."""
    if cell_text(own["answer"]).strip() != cell_text(asked.get("contam_original_answer")).strip():
        return f"gold {cell_text(own['answer'])!r} there, {cell_text(asked.get('contam_original_answer'))!r} in the set"
    if not same_text(cell_text(own.get("question")), cell_text(asked.get("question"))):
        return f"question {cell_text(own.get('question'))[:80]!r} there, {cell_text(asked.get('question'))[:80]!r} here"
    if len(_options(own)) != len(_options(asked)) or not all(map(same_text, _options(own), _options(asked))):
        return f"options {_options(own)} there, {_options(asked)} here"
    hints = own.get("hint"), asked.get("hint")  # VLMEvalKit's prompt shows any hint that is not missing, blank too
    if _shown(hints[0]) != _shown(hints[1]) or not same_text(*map(cell_text, hints)):
        return f"hint {cell_text(hints[0])[:80]!r} there, {cell_text(hints[1])[:80]!r} here"
    return ""


def _add_originals_of_own_run(entry: ModelBenchmark, result: ResultFile, asked: dict[str, dict]) -> None:
    """Leaderboard mode: each perturbed item's original version from a run of VLMEvalKit's own dataset of the
    benchmark, found by its index and checked by content (the same question and options as the perturbed row,
    the set's original gold)."""
    rows = {cell_text(row["index"]): (number, row) for number, row in enumerate(result.table.to_dict("records"), 2)}
    answers = {
        index: BuiltinAnswer(
            correct=int(cell_text(row["hit"])),
            gold=cell_text(row["answer"]),
            response=cell_text(row["prediction"]),
            where=f"{result.path} (row {number})",
        )
        for index, (number, row) in rows.items()
    }
    pair_originals(
        entry,
        str(result.path),
        answers,
        lambda item_id, perturbed, _: _mismatch(rows[perturbed.original_id][1], asked[item_id]),
    )
    entry.notes = (
        *entry.notes,
        paired_note(result.path.name, f"VLMEvalKit's own {result.dataset}", entry, len(rows))
        + "; both runs ask with VLMEvalKit's multiple-choice prompt, but a model class that picks its prompt by the "
        "dataset's name may see the two names differently",
    )


def _runs(paths: Iterable[str | Path]) -> tuple[dict[tuple[str, str, str], ResultFile], list[str]]:
    """One result file per (model, benchmark, family) under `paths`, and the result files of other datasets,
    each named with why it is not read."""
    by_run: dict[tuple[str, str, str], list[ResultFile]] = defaultdict(list)
    ignored = []
    for path in result_files([Path(p) for p in paths]):
        result = read_result(path)
        if result is None and not is_vanilla_extra(path):
            ignored.append(f"{path} (a result of a dataset that is neither an export nor a benchmark's own)")
        elif result is not None:
            by_run[(result.model, result.benchmark, result.family)].append(result)
    for (model, _, _), found in by_run.items():
        if len(found) > 1:
            files = ", ".join(str(r.path) for r in found)
            raise ReportInputError(f"{model}: {len(found)} runs of {found[0].dataset} ({files}); pass one")
    return {key: found for key, (found,) in by_run.items()}, ignored


def load(paths: Iterable[str | Path]) -> Loaded:
    """Every model's scored items per benchmark, and its detector runs, from the result files of exports."""
    by_run, ignored = _runs(paths)
    benchmarks, detectors = [], []
    pairs: dict[tuple[str, str], list[ResultFile]] = defaultdict(list)
    for (model, benchmark, family), result in sorted(by_run.items()):
        if family in DETECTORS:
            rechecked(result)
            detectors.append(
                DetectorRun(
                    model=model_label(result),
                    benchmark=benchmark,
                    detector=family,
                    records=_items(result),
                    source=str(result.path),
                    host=NAME,
                    averages_strata=False,  # VLMEvalKit's Overall is a plain mean over the items
                )
            )
        elif family == BUILTIN_CIRCULAR:
            records = circular_records(result)
            if records:
                detectors.append(
                    DetectorRun(
                        model=model_label(result),
                        benchmark=benchmark,
                        detector=CIRCULAR,
                        records=records,
                        source=str(result.path),
                        host=NAME,
                        of_the_set=False,
                        averages_strata=False,
                    )
                )
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
            raise ReportInputError(
                f"{model}, {benchmark}: no run of the {missing} export (found only "
                f"{', '.join(str(r.path) for r in results)})"
            )
        benchmarks.append(_perturbation_entry(chosen))
    return Loaded(benchmarks, detectors, ignored=ignored)
