"""inspect-ai's logs read into the report's records, each checked before it is trusted.

A log is read only when the run finished (status success, not invalidated), asked every sample of the task once
(no --limit, --sample-id or --epochs; no shuffled choices) and no sample failed. Every score is recomputed: the
reply is read again by inspect's own multiple-choice parser and compared with the sample's target, and a score
or an accuracy the log states differently is refused, as is a sample whose target is not its record's gold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.base import run_label
from lmms_contam.hosts.inspect_ai import NAME, PACKAGE
from lmms_contam.hosts.inspect_ai.log_files import log_files
from lmms_contam.hosts.inspect_ai.samples import RECORD
from lmms_contam.hosts.inspect_ai.tasks import TASK_METADATA
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED
from lmms_contam.report.inputs import DetectorRun, Loaded, ModelBenchmark, ReportInputError, ScoredItem, same_text

SCORER = "choice"
CORRECT = "C"  # inspect's value of a right answer
MATCHING = (
    "inspect's multiple_choice() prompt and choice() scorer (a reply counts only in the form 'ANSWER: X'), every "
    "score recomputed from the reply"
)


@dataclass(frozen=True)
class Run:
    """One log of one of the plugin's tasks, its samples checked and rescored."""

    path: Path
    model: str  # as the report shows it: inspect's model name, marked as its run
    benchmark: str
    family: str
    items: list[ScoredItem]
    asked: dict[str, tuple[str, ...]]  # item id -> its question's text and its choices, as a version asked them
    unread: int  # replies in which inspect's parser found no letter


def _refuse(path: Path, what: str) -> ReportInputError:
    return ReportInputError(f"{path}: {what}")


def _check_finished(path: Path, log) -> None:
    if log.status != "success":
        reason = f" ({log.error.message})" if log.error else ""
        raise _refuse(path, f"the run did not finish (status {log.status}{reason}); run the task again")
    if getattr(log, "invalidated", False):
        raise _refuse(path, "the log was invalidated after the run")
    config, dataset = log.eval.config, log.eval.dataset
    if config.limit is not None or config.sample_id is not None:
        raise _refuse(path, "ran a subset of the task (--limit or --sample-id): the report needs every item")
    if (config.epochs or 1) != 1:
        raise _refuse(path, f"ran {config.epochs} epochs; the report pairs one answer per version")
    if dataset.shuffled or getattr(dataset, "shuffled_choices", False):
        raise _refuse(path, "its samples or choices were shuffled: the replies are not the ones logged")
    if not log.samples or len(log.samples) != dataset.samples:
        raise _refuse(path, f"holds {len(log.samples or [])} of the task's {dataset.samples} samples")


def letters_read(completion: str, n_choices: int) -> set[str]:
    """The letters inspect's multiple-choice solver reads in a reply (its own parser, run again)."""
    from inspect_ai.solver._multiple_choice import parse_answers  # inspect's, so the recheck reads as it does

    state = SimpleNamespace(output=SimpleNamespace(completion=completion), choices=[None] * n_choices)
    return parse_answers(state, multiple_correct=False)


def _question(sample) -> str:
    """The text a sample asks (its message's text parts; the image apart)."""
    return sample.input[0].text if isinstance(sample.input, list) else str(sample.input)


def _scored(path: Path, sample, manifest: str | None) -> tuple[ScoredItem, bool]:
    """The sample's record, scored from its reply, and whether inspect's parser read a letter in the reply."""
    where = f"{path}: sample {sample.id}"
    if sample.error is not None:
        raise ReportInputError(f"{where}: failed ({sample.error.message}); run the task again")
    record = (sample.metadata or {}).get(RECORD)
    score = (sample.scores or {}).get(SCORER)
    if score is None:
        raise ReportInputError(f"{where}: has no {SCORER} score")
    completion = sample.output.completion if sample.output else ""
    letters = letters_read(completion, len(sample.choices or []))
    correct = letters == {sample.target}
    try:
        item = replace(ScoredItem.from_logged({**(record or {}), "correct": int(correct)}, where), response=completion)
    except ValueError as exc:
        raise ReportInputError(str(exc)) from exc
    if sample.id != f"{item.item_id}:{item.variant}" or sample.target != item.gold:
        raise ReportInputError(f"{where}: its target {sample.target!r} and id are not its record's ({item.gold!r})")
    if len(sample.choices or []) != item.n_options or item.set_manifest != manifest:
        raise ReportInputError(f"{where}: its choices or set are not the task's")
    if (score.value == CORRECT) != correct:
        raise ReportInputError(
            f"{where}: scored {score.value!r}, but its reply {completion[:80]!r} reads as "
            f"{'right' if correct else 'wrong'} by inspect's parser (a score edited, or another scorer's)"
        )
    return item, bool(letters)


def _stated_accuracy(log) -> float | None:
    for score in log.results.scores if log.results else []:
        if score.name == SCORER and "accuracy" in score.metrics:
            return score.metrics["accuracy"].value
    return None


def read_run(path: Path) -> Run | None:
    """The log's checked records, or None for a log of another package's task."""
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(path), exclude_fields={"events", "attachments", "store"})
    except Exception as exc:  # inspect raises many kinds for a damaged file
        raise _refuse(path, f"not a readable inspect log ({type(exc).__name__}: {exc})") from exc
    if not log.eval.task.startswith(f"{PACKAGE}/"):
        return None
    task = (log.eval.metadata or {}).get(TASK_METADATA)
    if not isinstance(task, dict):
        raise _refuse(path, f"a task of {PACKAGE} without its record in the log's metadata")
    _check_finished(path, log)
    scored = [_scored(path, sample, task.get("set_manifest")) for sample in log.samples]
    items = [item for item, _ in scored]
    accuracy, stated = sum(i.correct for i in items) / len(items), _stated_accuracy(log)
    if stated is None or abs(stated - accuracy) > 1e-9:
        raise _refuse(path, f"states accuracy {stated}, but its samples score {accuracy:.6f}")
    return Run(
        path=path,
        model=run_label(log.eval.model, NAME),
        benchmark=str(task["benchmark"]),
        family=str(task["family"]),
        items=items,
        asked={item.item_id: (_question(s), *s.choices) for item, s in zip(items, log.samples, strict=True)},
        unread=sum(not read for _, read in scored),
    )


def _notes(runs: list[Run]) -> tuple[str, ...]:
    return tuple(
        f"{run.path.name}: {run.unread} of {len(run.items)} replies gave no 'ANSWER: X' inspect reads; they count "
        "as wrong"
        for run in runs
        if run.unread
    )


def _same_items(original: Run, perturbed: Run) -> None:
    """Runs of the original and perturbed tasks apart: each item asks the same question with the same options."""
    for item_id, asked in original.asked.items():
        other = perturbed.asked.get(item_id)
        if other is not None and (len(asked) != len(other) or not all(map(same_text, asked, other))):
            raise ReportInputError(
                f"{original.model}, {original.benchmark}: item {item_id} is not the same item in {original.path} "
                f"and {perturbed.path}: runs of two different sets"
            )


def _perturbation_entry(runs: list[Run]) -> ModelBenchmark:
    first = runs[0]
    entry = ModelBenchmark(
        first.model, first.benchmark, host=NAME, matching=MATCHING, notes=_notes(runs), averages_strata=False
    )
    for run in runs:
        entry.add_run(run.items, run.family, str(run.path))
    if len(runs) == 2:
        _same_items(*sorted(runs, key=lambda r: r.family != ORIGINAL))
    entry.check_pairs()
    return entry


def _runs(paths: Iterable[Path]) -> tuple[dict[tuple[str, str, str], Run], list[str]]:
    by_run: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    ignored = []
    for path in log_files(list(paths)):
        run = read_run(path)
        if run is None:
            ignored.append(f"{path} (an inspect log of another package's task)")
            continue
        by_run[(run.model, run.benchmark, run.family)].append(run)
    for (model, benchmark, family), found in by_run.items():
        if len(found) > 1:
            files = ", ".join(str(r.path) for r in found)
            raise ReportInputError(f"{model}: {len(found)} logs of {benchmark}_{family} ({files}); pass one")
    return {key: found for key, (found,) in by_run.items()}, ignored


def load(paths: Iterable[Path]) -> Loaded:
    """Every model's scored items per benchmark, and its detector runs, from the logs of the plugin's tasks."""
    by_run, ignored = _runs(paths)
    detectors = [
        DetectorRun(
            model=run.model,
            benchmark=run.benchmark,
            detector=family,
            records=run.items,
            source=str(run.path),
            host=NAME,
            averages_strata=False,  # inspect's accuracy is a plain mean over the samples
        )
        for (_, _, family), run in sorted(by_run.items())
        if family in DETECTORS
    ]
    pairs: dict[tuple[str, str], dict[str, Run]] = defaultdict(dict)
    for (model, benchmark, family), run in sorted(by_run.items()):
        if family not in DETECTORS:
            pairs[(model, benchmark)][family] = run
    benchmarks = []
    for (model, benchmark), families in sorted(pairs.items()):
        if CONTAM in families:
            benchmarks.append(_perturbation_entry([families[CONTAM]]))
        elif set(families) >= {ORIGINAL, PERTURBED}:
            benchmarks.append(_perturbation_entry([families[ORIGINAL], families[PERTURBED]]))
        else:
            (family,) = families
            missing = ORIGINAL if family == PERTURBED else PERTURBED
            raise ReportInputError(
                f"{model}, {benchmark}: no log of the {benchmark}_{missing} task (found only {families[family].path})"
            )
    return Loaded(benchmarks, detectors, ignored=ignored)
