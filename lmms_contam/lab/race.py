"""The detector race: every detector on every kind of contamination, through lmms-eval as a user runs it.

On the varied benchmark (where a letter says nothing without reading the options and a question can be
remembered without its image) the clean model, a control per seed and a model per seed and kind of
contamination each run the paired task and every detector's task; the report's own reading decides which
detector flags which model (p < 0.05, the report's alpha). Per detector the table gives the false accusations
(clean and controls) and the detection rate per kind, each with an exact 95% interval. `lmms-contam experiment
--detectors` runs it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.circular import CIRCULAR
from lmms_contam.detectors.option_shuffle import OPTION_SHUFFLE
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.readers import read_runs
from lmms_contam.lab.evaluate import evaluate, resolving
from lmms_contam.lab.experiment import Check, entries_for_folder
from lmms_contam.lab.race_models import CLEAN, RaceModel, RaceRecipe, build_race_models
from lmms_contam.lab.race_table import (
    CIRCULAR_VS_CLEAN,
    PERTURBATION,
    Flag,
    RaceOutcome,
    inflation,
    plot,
    race_table,
    rates,
)
from lmms_contam.report import analysis
from lmms_contam.report.build import build as build_report
from lmms_contam.report.inputs import Loaded
from lmms_contam.stats import above_chance_p
from lmms_contam.synthetic.benchmark import VARIED, build_test_set
from lmms_contam.synthetic.varied import draw_varied_scene

TASKS = (f"{VARIED.name}_contam", *(f"{VARIED.name}_{name}" for name in DETECTORS))
ALPHA = 0.05  # a detector flags a model at the report's alpha
STRONG = 0.01  # semantic perturbation must flag the paper's contamination at this p on every seed
READS_OPTIONS = 0.10  # the clean model's CircularEval accuracy on clear items within this of its vanilla one


def run_race(recipe: RaceRecipe, out: str | Path) -> RaceOutcome:
    """Build (or reuse) the set, the models and their lmms-eval runs under `out`; write report.{md,json},
    race.md, race.png and race.json there."""
    started = time.monotonic()
    out = Path(out).resolve()
    test_set = out / "data" / f"{VARIED.name}-{recipe.test_items}.parquet"
    if not test_set.exists():
        build_test_set(recipe.test_items, test_set, of=VARIED)
    folders = build_race_models(recipe, out / "models")
    names = {folder.name: folder for folder in folders.values()}  # an evaluation per model the settings made
    runs = evaluate(names, dict.fromkeys(names, TASKS), test_set, out / "eval", out / "logs" / "race.log", VARIED.name)
    loaded = read_runs(list(runs.values()))
    with resolving(test_set, VARIED.name):
        analysed, _ = build_report(loaded, alpha=ALPHA, markdown=out / "report.md", json_path=out / "report.json")
    paired = {model: _paired(analysed, folder) for model, folder in folders.items()}
    against_clean = circular_against_clean(loaded, folders)
    outcome = RaceOutcome(
        flags={
            model.name: _flags(paired[model], analysed, folder) | against_clean.get(model.name, {})
            for model, folder in folders.items()
        },
        kinds={model.name: model.kind for model in folders},
        scores={model.name: result.comparison.acc_original for model, result in paired.items()},
    )
    outcome.checks = [*reads_the_options(loaded, analysed, folders[RaceModel(CLEAN)]), *perturbation_holds(outcome)]
    outcome.seconds = time.monotonic() - started
    _write(outcome, recipe, out)
    return outcome


def _paired(analysed: analysis.Analysed, folder: Path) -> analysis.BenchmarkResult:
    """The model's one paired result (the race runs one benchmark)."""
    (result,) = entries_for_folder(analysed.results, folder)
    return result


def _flags(result: analysis.BenchmarkResult, analysed: analysis.Analysed, folder: Path) -> dict[str, Flag]:
    flags = {
        PERTURBATION: Flag(
            result.comparison.delta, result.comparison.mcnemar_p, result.verdict == analysis.CONTAMINATED
        )
    }
    for found in entries_for_folder(analysed.detectors, folder):
        flags[found.detector] = Flag(found.signal.signal, found.signal.p_value, found.signal.flagged(ALPHA))
    return flags


def _one_of(entries: list, folder: Path, detector: str):
    """The model's one run (or analysed result) of `detector` among `entries`."""
    (entry,) = [entry for entry in entries_for_folder(entries, folder) if entry.detector == detector]
    return entry


def circular_against_clean(loaded: Loaded, folders: dict[RaceModel, Path]) -> dict[str, dict[str, Flag]]:
    """Each other model's CircularEval drop beyond the clean model's, as `report --circular-reference` reads it."""
    reference = {(CIRCULAR, VARIED.name): _one_of(loaded.detectors, folders[RaceModel(CLEAN)], CIRCULAR)}
    flags = {}
    for model, folder in folders.items():
        if model.kind != CLEAN:
            signal = analysis.analyse_detector(_one_of(loaded.detectors, folder, CIRCULAR), reference).signal
            flags[model.name] = {CIRCULAR_VS_CLEAN: Flag(signal.signal, signal.p_value, signal.flagged(ALPHA))}
    return flags


def reads_the_options(loaded: Loaded, analysed: analysis.Analysed, clean: Path) -> list[Check]:
    """Item 2's criterion on the clean model: on clear items (those the image decides), CircularEval accuracy
    within READS_OPTIONS of vanilla accuracy, and no significant drop when the options are shuffled."""
    by_item: dict[str, dict[str, int]] = {}
    for record in _one_of(loaded.detectors, clean, CIRCULAR).records:
        by_item.setdefault(record.original_id, {})[record.variant] = record.correct
    clear = [versions for item, versions in by_item.items() if not draw_varied_scene(item).confusion]
    in_order = [versions["rotation0"] for versions in clear]
    vanilla, every = sum(in_order) / len(clear), sum(all(versions.values()) for versions in clear) / len(clear)
    above = above_chance_p(in_order, [0.25] * len(clear))
    shuffle = _one_of(analysed.detectors, clean, OPTION_SHUFFLE)
    return [
        Check(
            "the clean model answers the clear items above chance (one-sided binomial p < 0.01)",
            above < STRONG,
            f"{sum(in_order)} of {len(clear)} right, p {above:.2g}",
        ),
        Check(
            f"the clean model reads the options: CircularEval within {READS_OPTIONS:.0%} of vanilla on clear items",
            vanilla - every <= READS_OPTIONS,
            f"vanilla {vanilla:.3f}, circular {every:.3f} on {len(clear)} clear items",
        ),
        Check(
            "the clean model's option-shuffle drop is not significant",
            not shuffle.signal.flagged(ALPHA),
            f"{shuffle.signal.signal:+.3f}, p {shuffle.signal.p_value:.2g}",
        ),
    ]


def perturbation_holds(outcome: RaceOutcome) -> list[Check]:
    """The paper's contamination (image, question and answer) flagged by semantic perturbation at p < STRONG."""
    checks = []
    for name, kind in outcome.kinds.items():
        if kind == "image_question_answer":
            flag = outcome.flags[name][PERTURBATION]
            checks.append(
                Check(
                    f"{name}: semantic perturbation flags it (delta < 0, p < {STRONG})",
                    flag.signal < 0 and flag.p_value < STRONG,
                    f"delta {flag.signal:+.3f}, p {flag.p_value:.2g}",
                )
            )
    return checks


def _write(outcome: RaceOutcome, recipe: RaceRecipe, out: Path) -> None:
    plot(outcome, out / "race.png")
    with atomic_path(out / "race.md") as tmp:
        tmp.write_text(race_table(outcome) + "\n")
    summary = {
        "recipe": asdict(recipe),
        "kinds": outcome.kinds,
        "flags": {name: {d: asdict(f) for d, f in flags.items()} for name, flags in outcome.flags.items()},
        "rates": rates(outcome),
        "scores": outcome.scores,
        "inflation": inflation(outcome),
        "checks": [asdict(c) for c in outcome.checks],
        "passed": outcome.passed,
        "seconds": round(outcome.seconds, 1),
    }
    with atomic_path(out / "race.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, allow_nan=True) + "\n")
