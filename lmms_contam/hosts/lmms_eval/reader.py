"""lmms-eval's output folders read into the report's records (per-(model, benchmark) scored items, detector
and scanned runs).

Every refusal names the file (and line) at fault: a report built on a partial or mismatched run
would look authoritative and be wrong. Every figure the plugin's tasks logged in results.json is
recomputed from the samples with the task's own aggregation, so a samples file of another run is refused.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import datasets
from tqdm.auto import tqdm

from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.leaderboard import BuiltinAnswer, pair_originals, paired_note
from lmms_contam.hosts.lmms_eval import NAME
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS, binding, builtin_task
from lmms_contam.hosts.lmms_eval.scoring import AGGREGATIONS, task_metrics
from lmms_contam.records import ORIGINAL, PERTURBED, ContamRecord, checked
from lmms_contam.registry.specs import perturbable, scannable, with_detectors
from lmms_contam.report.inputs import (
    DetectorRun,
    Loaded,
    ModelBenchmark,
    ReportInputError,
    ScannedRun,
    ScoredItem,
    same_text,
)
from lmms_contam.schema import IMAGE_COLUMNS, PerturbedSetError
from lmms_contam.set_locations import load_perturbed_set

TASK_VERSION = 1.0
SCANNED_FIELDS = ("item_id", "correct", "image_only", "image_text")
SAMPLES_FILE = re.compile(r"^(?P<stamp>.+)_samples_(?P<task>.+)\.jsonl$")


T = TypeVar("T")


def model_label(results: dict) -> str:
    config = results.get("config") or {}
    label = results.get("model_name") or config.get("model") or "unknown-model"
    args = config.get("model_args")
    return f"{label} ({args})" if args and not results.get("model_name") else str(label)


def is_output_file(path: Path) -> bool:
    return path.name.endswith("_results.json") or SAMPLES_FILE.match(path.name) is not None


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Every *_results.json under the given folders, plus results files named directly; each once, however
    its folder was spelt (paths are compared resolved)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(path.resolve().rglob("*_results.json")))
        elif path.is_file() and path.name.endswith("_results.json"):
            found.append(path.resolve())
        elif path.is_file() and SAMPLES_FILE.match(path.name):
            found.append(path.resolve().with_name(f"{SAMPLES_FILE.match(path.name)['stamp']}_results.json"))
        else:
            raise ReportInputError(f"{path}: not an lmms-eval output folder, *_results.json or *_samples_<task>.jsonl")
    if not found:
        raise ReportInputError(f"no *_results.json under {', '.join(map(str, paths))}")
    return list(dict.fromkeys(found))


def _read_json(path: Path) -> dict:
    """An lmms-eval results file: a JSON object whose sections the report reads are objects too."""
    if not path.is_file():
        raise ReportInputError(f"{path}: missing (its samples files are here but the results file is not)")
    text = path.read_text()
    if not text.strip():
        raise ReportInputError(f"{path}: empty file")
    try:
        results = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON (truncated?): {exc}") from exc
    if not isinstance(results, dict):
        raise ReportInputError(f"{path}: an lmms-eval results file is a JSON object, not {_kind(results)}")
    for section in ("config", "configs", "n-samples", "results"):
        if not isinstance(results.get(section, {}), dict):
            raise ReportInputError(f"{path}: '{section}' is {_kind(results[section])}, expected an object")
    for task, config in results.get("configs", {}).items():
        if not isinstance(config, dict):
            raise ReportInputError(f"{path}: 'configs' of {task} is {_kind(config)}, expected an object")
    return results


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _read_samples(path: Path, expected: int | None) -> list[tuple[int, dict]]:
    """(line number, sample) for every line; each must be a JSON object, and as many as results.json says
    were logged (a samples file cut short, even at a pair boundary, is refused)."""
    lines = path.read_text().splitlines()
    if not any(line.strip() for line in lines):
        raise ReportInputError(f"{path}: empty file")
    samples = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportInputError(f"{path}:{number}: not valid JSON (truncated line?): {exc}") from exc
        if not isinstance(sample, dict):
            raise ReportInputError(f"{path}:{number}: a sample is a JSON object, not {_kind(sample)}")
        samples.append((number, sample))
    if expected is not None and len(samples) != expected:
        raise ReportInputError(
            f"{path}: {len(samples)} samples, but its results file says {expected} were logged (a truncated "
            "or replaced samples file?)"
        )
    return samples


def _check_task(results: dict, task: str, source: Path, builtin: bool = False) -> int | None:
    """Refuse another task version (of the plugin's tasks) or a --limit run; return how many samples the run
    logged."""
    config = results.get("configs", {}).get(task) or {}
    metadata = config.get("metadata") if isinstance(config, dict) else None
    versions = [entry.get("version") for entry in metadata or [] if isinstance(entry, dict)]
    if versions and _number(versions[0]) != TASK_VERSION and not builtin:
        raise ReportInputError(f"{source}: task {task} version {versions[0]}; this report reads version {TASK_VERSION}")
    limit = results.get("config", {}).get("limit")
    counts = results.get("n-samples", {}).get(task) or {}
    if not isinstance(counts, dict):
        raise ReportInputError(f"{source}: 'n-samples' of {task} is {_kind(counts)}, expected an object")
    effective, original = _number(counts.get("effective")), _number(counts.get("original"))
    if limit not in (None, -1) or (effective is not None and original is not None and effective < original):
        raise ReportInputError(
            f"{source}: task {task} ran with --limit ({counts.get('effective')} of {counts.get('original')} "
            "documents); a contamination verdict needs every kept item"
        )
    return None if effective is None else int(effective)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _record(sample: dict, source: Path, line: int) -> ContamRecord:
    """A perturbation or detector sample's record."""
    try:
        return ContamRecord.from_logged(sample.get("contam_ids"), f"{source}:{line}")
    except ValueError as exc:
        raise ReportInputError(str(exc)) from exc


def _to_item(sample: dict, source: Path, line: int) -> ScoredItem:
    response = sample.get("filtered_resps")
    response = response[0] if isinstance(response, list) and response else response
    logged = _record(sample, source, line).as_logged()
    return ScoredItem(**logged, response=str(response if response is not None else ""))


@dataclass(frozen=True)
class _Source:
    model: str
    benchmark: str
    kind: str  # contam | original | perturbed | builtin (lmms-eval's own task of it), or a peer detector
    samples: Path
    logged: int | None  # how many samples results.json says were logged
    results_file: Path
    metrics: dict  # the task's section of results.json's "results": what the run logged for it
    settings: dict  # what decides the replies besides the model: its prompt and generation settings
    aggregations: dict  # metric -> the name of the function the task aggregates it with


BUILTIN = "builtin"
FUNCTION = re.compile(r"<function (?P<name>[\w.<>]+) at 0x[0-9a-f]+>")
# Settings of a task and a run that decide the replies besides the model; compared in leaderboard mode.
PROMPT_SETTINGS = ("doc_to_visual", "doc_to_text", "lmms_eval_specific_kwargs")
TASK_SETTINGS = (*PROMPT_SETTINGS, "generation_kwargs")
RUN_SETTINGS = ("model", "model_args", "gen_kwargs")
CHAT_SETTINGS = ("system_instruction", "chat_template", "fewshot_as_multiturn")  # results.json's top level
PROMPT_CHANGING = (*PROMPT_SETTINGS, *CHAT_SETTINGS)  # with these different, the prompts differ too


def _aggregations(results: dict, task: str) -> dict[str, str]:
    """Each metric of `task` in this run and the name of the function that aggregated it."""
    config = results.get("configs", {}).get(task) or {}
    entries = config.get("metric_list") if isinstance(config, dict) else None
    named = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and (found := FUNCTION.match(str(entry.get("aggregation", "")))):
            named[str(entry.get("metric"))] = found["name"].rsplit(".", 1)[-1]
    return named


def _settings(results: dict, task: str) -> dict:
    """The prompt and generation settings of `task` in this run, functions by name (their address differs)."""
    config = results.get("configs", {}).get(task) or {}
    values = {
        **{k: config.get(k) for k in TASK_SETTINGS},
        **{k: results.get("config", {}).get(k) for k in RUN_SETTINGS},
        **{k: results.get(k) for k in CHAT_SETTINGS},
    }
    return {key: FUNCTION.sub(r"\g<name>", str(value)) for key, value in values.items()}


def _plugin_task(task: str) -> re.Match | None:
    """(benchmark, family) of a task of the plugin's, for the benchmarks the registry has when asked:
    `<benchmark>_scanned` may be a task including its YAML under a longer name (e.g. one reading a local copy)."""
    patterns = (
        rf"^({'|'.join(perturbable())})_(contam|original|perturbed)$",
        rf"^({'|'.join(with_detectors())})_({'|'.join(DETECTORS)})$",
        rf"^({'|'.join(scannable())})_(scanned)(?:_[\w-]+)?$",
    )
    return next(filter(None, (re.match(pattern, task) for pattern in patterns)), None)


def _builtin_by_scorer() -> dict[str, str]:
    """lmms-eval's own tasks of a benchmark, known by the process_results they name (so a task including a
    built-in's YAML under another name is known too): leaderboard mode pairs their runs with *_perturbed."""
    return {
        bound.scorer.process_results: name
        for name, bound in BINDINGS.items()
        if bound.builtin_yaml and bound.scorer.module.startswith("lmms_eval.")
    }


def _task_parts(task: str, results: dict) -> tuple[str, str] | None:
    match = _plugin_task(task)
    if match:
        return match.groups()
    config = results.get("configs", {}).get(task) or {}
    named = FUNCTION.match(str(config.get("process_results", "")))
    benchmark = _builtin_by_scorer().get(named["name"]) if named else None
    return (benchmark, BUILTIN) if benchmark else None


def _discover(paths: list[str | Path]) -> tuple[list[_Source], set[str]]:
    sources, unknown = [], set()
    runs = find_runs(paths)
    for results_path in tqdm(runs, desc="lmms-contam: reading runs", disable=len(runs) < 5):
        results = _read_json(results_path)
        stamp = results_path.name[: -len("_results.json")]
        for samples_path in sorted(results_path.parent.glob(f"{stamp}_samples_*.jsonl")):
            task = SAMPLES_FILE.match(samples_path.name)["task"]
            parts = _task_parts(task, results)
            if not parts:
                unknown.add(task)
                continue
            logged = _check_task(results, task, results_path, builtin=parts[1] == BUILTIN)
            metrics = (results.get("results") or {}).get(task)
            sources.append(
                _Source(
                    model_label(results),
                    *parts,
                    samples_path,
                    logged,
                    results_path,
                    metrics if isinstance(metrics, dict) else {},
                    _settings(results, task),
                    _aggregations(results, task),
                )
            )
    named = [Path(p) for p in paths if Path(p).is_file() and SAMPLES_FILE.match(Path(p).name)]
    for path in named:
        task = SAMPLES_FILE.match(path.name)["task"]
        if not any(source.samples == path.resolve() for source in sources):
            raise ReportInputError(
                f"{path}: task {task!r} is not an lmms-contam task (*_contam, *_original, *_perturbed, *_scanned, "
                f"or a peer detector: *_{', *_'.join(DETECTORS)})"
            )
    return sources, unknown


def _one_run_per_kind(model: str, benchmark: str, sources: list[_Source]) -> dict[str, _Source]:
    by_kind: dict[str, list[_Source]] = defaultdict(list)
    for source in sources:
        by_kind[source.kind].append(source)
    for kind, found in by_kind.items():
        if len(found) > 1:
            files = ", ".join(str(s.samples) for s in found)
            raise ReportInputError(f"{model}, {benchmark}: {len(found)} runs of {benchmark}_{kind} ({files}); pass one")
    return {kind: found[0] for kind, found in by_kind.items()}


def _select(model: str, benchmark: str, sources: list[_Source]) -> list[_Source]:
    """The paired task if it ran, else one original and one perturbed task, else (leaderboard mode) lmms-eval's
    own task of the benchmark and the perturbed task."""
    by_kind = _one_run_per_kind(model, benchmark, sources)
    if "contam" in by_kind:
        return [by_kind["contam"]]
    if "perturbed" in by_kind and "original" not in by_kind and BUILTIN in by_kind:
        return [by_kind["perturbed"], by_kind[BUILTIN]]
    missing = [kind for kind in ("original", "perturbed") if kind not in by_kind]
    if missing:
        present = ", ".join(str(s.samples) for s in sources)
        raise ReportInputError(
            f"{model}, {benchmark}: no {benchmark}_{missing[0]} samples (found only {present}); "
            f"with a run of lmms-eval's own {benchmark} task, {benchmark}_perturbed "
            "is enough"
        )
    return [by_kind["original"], by_kind["perturbed"]]


def load(paths: Iterable[str | Path], pair_differing_settings: bool = False) -> Loaded:
    """Every model's scored items per benchmark, and its peer detector records, from the samples files.
    `pair_differing_settings`: pair a built-in run with a perturbed run made with other prompt or generation
    settings (refused by default: the delta could come from them)."""
    paths = list(paths)
    sources, unknown = _discover(paths)
    if not sources:
        listed = ", ".join(sorted(unknown)) or "none"
        raise ReportInputError(
            f"no lmms-contam task samples under {', '.join(map(str, paths))} (tasks found: {listed}); "
            "run the *_contam, or *_original and *_perturbed, tasks (and any peer detector tasks) with --log_samples"
        )
    grouped: dict[tuple[str, str], list[_Source]] = defaultdict(list)
    for source in sources:
        grouped[(source.model, source.benchmark)].append(source)
    benchmarks, detectors, scanned = [], [], []
    for (model, benchmark), found in sorted(grouped.items()):
        perturbation = [source for source in found if source.kind not in (*DETECTORS, "scanned")]
        if perturbation and {source.kind for source in perturbation} != {BUILTIN}:  # a built-in run alone: not ours
            benchmarks.append(_perturbation_entry(model, benchmark, perturbation, pair_differing_settings))
        by_kind = _one_run_per_kind(model, benchmark, [source for source in found if source not in perturbation])
        detectors += [_detector_run(by_kind[name]) for name in DETECTORS if name in by_kind]
        if "scanned" in by_kind:
            scanned.append(_scanned_run(by_kind["scanned"]))
    return Loaded(benchmarks, detectors, scanned)


def _perturbation_entry(
    model: str, benchmark: str, candidates: list[_Source], pair_differing_settings: bool
) -> ModelBenchmark:
    entry = ModelBenchmark(model, benchmark, host=NAME)
    prompts: dict[tuple[str, str], str] = {}  # (item id, version) -> the prompt it was asked with
    selected = _select(model, benchmark, candidates)
    for source in selected:
        if source.kind == BUILTIN:
            continue
        samples = _read_samples(source.samples, source.logged)
        read = []
        for number, sample in tqdm(samples, desc=source.samples.name, disable=len(samples) < 5000):
            item = _to_item(sample, source.samples, number)
            if source.kind != "contam" and item.variant != source.kind:
                raise ReportInputError(f"{source.samples}:{number}: a {item.variant} sample in a {source.kind} task")
            if item.variant in entry.items[item.item_id]:
                raise ReportInputError(f"{source.samples}:{number}: repeats item {item.item_id} ({item.variant})")
            entry.items[item.item_id][item.variant] = item
            prompts[item.item_id, item.variant] = str(sample.get("input", ""))
            read.append(item.as_logged())
        _check_logged_metrics(source, read)
        for variant in ("original", "perturbed") if source.kind == "contam" else (source.kind,):
            entry.sources[variant] = str(source.samples)
    if selected[-1].kind == BUILTIN:
        _add_originals_of_builtin_run(entry, selected[-1], selected[0], prompts, pair_differing_settings)
    elif entry.sources.get(ORIGINAL) != entry.sources.get(PERTURBED):  # two runs: they must be of one set
        _check_versions_agree(entry, prompts)
    entry.check_pairs()
    return entry


def _check_versions_agree(entry: ModelBenchmark, prompts: dict[tuple[str, str], str]) -> None:
    """Both versions of an item asked the same question with the same options, and the original was scored
    against the gold the perturbed record names as the original's: *_original and *_perturbed runs of two
    different sets are refused even where neither names a manifest."""
    for item_id, versions in entry.items.items():
        original, perturbed = versions.get(ORIGINAL), versions.get(PERTURBED)
        if original is None or perturbed is None:
            continue  # check_pairs names it
        asked = prompts.get((item_id, ORIGINAL), ""), prompts.get((item_id, PERTURBED), "")
        gold_differs = perturbed.original_gold and original.gold != perturbed.original_gold
        if gold_differs or not same_text(*asked):
            raise ReportInputError(
                f"{entry.model}, {entry.benchmark}: item {item_id} is not the same item in {entry.sources[ORIGINAL]} "
                f"and {entry.sources[PERTURBED]} (gold {original.gold!r} and {perturbed.original_gold!r}, asked "
                f"{asked[0][:60]!r} and {asked[1][:60]!r}): runs of two different sets"
            )


@dataclass(frozen=True)
class _BuiltinSample:
    correct: int
    gold: str  # the target the built-in task logged
    prompt: str  # the text it asked with (lmms-eval's `input`)
    response: str
    line: int


def _builtin_samples(source: _Source) -> tuple[dict[str, _BuiltinSample], str | None]:
    """The built-in run's record of each item, keyed by its original id (read from the output the built-in task
    logged: lmms-eval does not log the document), after its logged figures are recomputed from these samples;
    and a note when they could not be."""
    bound = binding(source.benchmark)
    if bound.logged_id is None:
        raise ReportInputError(
            f"{source.samples}: lmms-eval's own {source.benchmark} task logs no item id in its "
            f"samples, so its run cannot be paired with {source.benchmark}_perturbed; run "
            f"{source.benchmark}_contam (or {source.benchmark}_original) instead"
        )
    samples = _read_samples(source.samples, source.logged)
    originals = {}
    for number, sample in samples:
        try:
            original_id, correct = bound.logged_id(sample), int(bound.scorer.read_correct({}, sample))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportInputError(
                f"{source.samples}:{number}: not a sample of lmms-eval's {source.benchmark} task "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        if original_id in originals:
            raise ReportInputError(f"{source.samples}:{number}: repeats item {original_id}")
        response = sample.get("filtered_resps")
        response = response[0] if isinstance(response, list) and response else response
        originals[original_id] = _BuiltinSample(
            correct, str(sample.get("target", "")), str(sample.get("input", "")), str(response or ""), number
        )
    return originals, _check_builtin_metrics(source, [sample for _, sample in samples])


def _check_builtin_metrics(source: _Source, samples: list[dict]) -> str | None:
    """Each figure the built-in run logged, recomputed from its samples with the built-in's own aggregation where
    that needs nothing but the samples: a samples file of another run is refused. Returns what could not be
    recomputed, for the report to name."""
    bound = binding(source.benchmark)
    module = importlib.import_module(bound.scorer.module)
    if not source.aggregations and bound.builtin_aggregations:
        raise ReportInputError(
            f"{source.results_file}: names no aggregation for {source.samples.name}'s task, whose figures lmms-eval "
            "computes from the samples alone: a damaged or edited results file, against which they cannot be checked"
        )
    unchecked = [] if source.aggregations else ["figures (its results file names no aggregation)"]
    for metric, function in source.aggregations.items():
        if function not in bound.builtin_aggregations:
            unchecked.append(f"{metric} ({function})")
            continue
        logged = [value for key, value in source.metrics.items() if key.split(",")[0] == metric]
        theirs = _number(logged[0]) if len(logged) == 1 else None
        if theirs is None:
            raise ReportInputError(
                f"{source.results_file}: logs {len(logged)} {metric} figure(s) for {source.samples.name}'s task, "
                "not one number: a damaged or edited results file, against which its samples cannot be checked"
            )
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # some built-in aggregations print their tables
                ours = float(getattr(module, function)([sample[metric] for sample in samples if metric in sample]))
        except (ArithmeticError, KeyError, TypeError, ValueError) as exc:
            raise ReportInputError(
                f"{source.samples}: lmms-eval's own {function} fails on its samples ({type(exc).__name__}: {exc}): "
                f"they are not {source.results_file.name}'s run (lines missing or replaced?)"
            ) from exc
        if not math.isclose(ours, theirs, rel_tol=1e-6, abs_tol=1e-9):
            raise ReportInputError(
                f"{source.samples}: its samples give {metric} = {ours:.6g}, but {source.results_file} logged "
                f"{theirs:.6g} for {source.samples.name}'s task: the samples file is not this run's (another "
                "model's, or lines replaced)"
            )
    if not unchecked:
        return None
    return (
        f"the built-in run's {', '.join(unchecked)} could not be recomputed from its samples (an aggregation "
        "that needs more than them): its samples are taken as that run's unchecked"
    )


def _add_originals_of_builtin_run(
    entry: ModelBenchmark, source: _Source, perturbed_run: _Source, prompts: dict[str, str], pair_differing: bool
) -> None:
    """Leaderboard mode: each perturbed item's original version from lmms-eval's own run of the benchmark, found
    by its original id and checked by content: the built-in asked the same question with the same options (its
    prompt is the perturbed version's, both built from the set's item) and logged the original's gold. The run's
    other items are left out. Runs made with other prompt or generation settings are refused unless
    `pair_differing`: they, not only memorisation, could move the delta."""
    differing = [key for key in source.settings if source.settings[key] != perturbed_run.settings[key]]
    if differing and not pair_differing:
        raise ReportInputError(
            f"{entry.model}, {entry.benchmark}: the built-in run ({source.samples}) and the perturbed run "
            f"({perturbed_run.samples}) differ in {', '.join(differing)}: the delta could come from that, not "
            "memorisation; rerun one with the other's settings, or pass --pair-differing-settings to pair them "
            "anyway (the verdict then says so)"
        )
    prompts_differ = any(key in PROMPT_CHANGING for key in differing)
    originals, unchecked = _builtin_samples(source)
    answers = {
        original_id: BuiltinAnswer(
            correct=found.correct, gold=found.gold, response=found.response, where=f"{source.samples}:{found.line}"
        )
        for original_id, found in originals.items()
    }
    pair_originals(
        entry,
        str(source.samples),
        answers,
        lambda item_id, perturbed, _: _mismatch(
            perturbed, originals[perturbed.original_id], prompts.get((item_id, PERTURBED), ""), not prompts_differ
        ),
    )
    unrescored = _rescore(entry, source, originals)
    notes = [
        paired_note(source.samples.name, "lmms-eval's own task", entry, len(originals))
        + (" (gold only: the prompts differ)" if prompts_differ else "")
    ]
    if differing:
        notes.append(
            f"PAIRED DESPITE DIFFERING SETTINGS (--pair-differing-settings): the built-in run and the perturbed run "
            f"differ in {', '.join(differing)}: the delta may come from that, not only from memorisation"
        )
    entry.notes = (*entry.notes, *notes, *(note for note in (unchecked, unrescored) if note))


def _rescore(entry: ModelBenchmark, source: _Source, originals: dict[str, _BuiltinSample]) -> str | None:
    """Each built-in sample's correctness scored again from its reply by the built-in's own process_results, on
    the set's original of the item as the built-in's document: a score edited apart from its reply is refused.
    Returns why it could not be done (no set here; a scorer that draws a letter for a reply naming none)."""
    bound = binding(entry.benchmark)
    if bound.scorer.draws:
        return f"the built-in run's scores are its own, unchecked ({entry.benchmark}'s scorer draws for some replies)"
    try:
        rows = load_perturbed_set(entry.benchmark, fetch=False)
    except (PerturbedSetError, OSError):
        return "the built-in run's scores are its own, unchecked (no set here to rebuild its documents from)"
    for column in IMAGE_COLUMNS:
        rows = rows.cast_column(column, datasets.Image(decode=False))  # scoring reads no image
    task = builtin_task(entry.benchmark)
    for row in rows:
        found = originals.get(row["original_id"])
        if found is None or row["item_id"] not in entry.items:
            continue
        doc = task.doc(row, variant=ORIGINAL, gold=row["original_answer"], image=None)
        if bound.scorer.score(doc, [found.response])[1] != found.correct:
            raise ReportInputError(
                f"{source.samples}:{found.line}: item {row['original_id']} scored {found.correct}, but lmms-eval's "
                f"own scoring of its reply {found.response[:60]!r} gives {1 - found.correct}: the score is not this "
                "reply's (edited, or copied from another run)"
            )
    return None


def _mismatch(perturbed: ScoredItem, found: _BuiltinSample, prompt: str, check_prompt: bool) -> str:
    """How the built-in run's item differs from the set's original, or an empty string."""
    if not perturbed.original_gold:
        return "the perturbed run logged no original gold: it was made by an earlier lmms-contam; rerun it"
    if found.gold.strip() != perturbed.original_gold.strip():
        return f"gold {found.gold!r} there, {perturbed.original_gold!r} in the set"
    if check_prompt and not same_text(found.prompt, prompt):
        return f"asked {found.prompt[:80]!r} there, {prompt[:80]!r} here"
    return ""


def _unrepeated(source: _Source, read: Callable[[dict, Path, int], T], key: Callable[[T], tuple[str, str]]) -> list[T]:
    """Every sample of a run read as a record; an item (in a version) logged twice is refused."""
    records, seen = [], set()
    for number, sample in _read_samples(source.samples, source.logged):
        record = read(sample, source.samples, number)
        if key(record) in seen:
            item_id, variant = key(record)
            raise ReportInputError(
                f"{source.samples}:{number}: repeats item {item_id}{f' ({variant})' if variant else ''}"
            )
        seen.add(key(record))
        records.append(record)
    return records


def _check_logged_metrics(source: _Source, logged: list[dict]) -> None:
    """Each figure the task logged in results.json, recomputed from the samples with the task's own
    aggregation: a samples file of another run (another model, lines replaced) disagrees and is refused."""
    task = f"{source.benchmark}_{source.kind}"
    for metric in task_metrics(source.kind):
        key = f"{metric.name},none"
        theirs = _number(source.metrics.get(key))
        if theirs is None:
            raise ReportInputError(
                f"{source.results_file}: no {metric.name} for task {task}, so its samples cannot be checked against "
                "the run (an older lmms-contam's? rerun the task)"
            )
        ours = AGGREGATIONS[metric.aggregation](logged)
        if not (math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(ours) and math.isnan(theirs))):
            raise ReportInputError(
                f"{source.samples}: its samples give {metric.name} = {ours:.6g}, but "
                f"{source.results_file} logged {theirs:.6g} for {task}: the samples file is not "
                "this run's (another model's, or lines replaced)"
            )


def _scanned_ids(sample: dict, source: Path, line: int) -> dict:
    """A scanned task's record: contamination flags per item, not a ContamRecord."""
    try:
        return checked(sample.get("contam_ids"), f"{source}:{line}", SCANNED_FIELDS)
    except ValueError as exc:
        raise ReportInputError(str(exc)) from exc


def _detector_run(source: _Source) -> DetectorRun:
    records = _unrepeated(source, _record, lambda r: (r.item_id, r.variant))
    _check_logged_metrics(source, [record.as_logged() for record in records])
    return DetectorRun(
        model=source.model,
        benchmark=source.benchmark,
        detector=source.kind,
        records=records,
        source=str(source.samples),
        host=NAME,
    )


def _scanned_run(source: _Source) -> ScannedRun:
    records = _unrepeated(source, _scanned_ids, lambda r: (str(r["item_id"]), ""))
    return ScannedRun(model=source.model, benchmark=source.benchmark, records=records, source=str(source.samples))
