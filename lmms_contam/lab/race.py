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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scipy import stats as scipy_stats

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.readers import read_runs
from lmms_contam.lab import race_data
from lmms_contam.lab.evaluate import evaluate, resolving
from lmms_contam.lab.experiment import Check, entries_for_folder
from lmms_contam.lab.race_models import CLEAN, RaceModel, RaceRecipe, build_race_models
from lmms_contam.report import analysis
from lmms_contam.report.build import build as build_report
from lmms_contam.report.inputs import Loaded
from lmms_contam.synthetic.benchmark import VARIED, build_test_set
from lmms_contam.synthetic.varied import draw_varied_scene

PERTURBATION = "semantic perturbation"
TASKS = (f"{VARIED.name}_contam", *(f"{VARIED.name}_{name}" for name in DETECTORS))
ALPHA = 0.05  # a detector flags a model at the report's alpha
STRONG = 0.01  # semantic perturbation must flag the paper's contamination at this p on every seed
READS_OPTIONS = 0.10  # the clean model's CircularEval accuracy on clear items within this of its vanilla one


@dataclass
class Flag:
    signal: float
    p_value: float
    flagged: bool


@dataclass
class RaceOutcome:
    flags: dict[str, dict[str, Flag]]  # model name -> detector (or PERTURBATION) -> its reading
    kinds: dict[str, str]  # model name -> its kind (CLEAN, a kind of contamination, or the control)
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


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
    outcome = RaceOutcome(
        flags={model.name: _flags(analysed, folder) for model, folder in folders.items()},
        kinds={model.name: model.kind for model in folders},
    )
    outcome.checks = [*reads_the_options(loaded, analysed, folders[RaceModel(CLEAN)]), *perturbation_holds(outcome)]
    outcome.seconds = time.monotonic() - started
    _write(outcome, recipe, out)
    return outcome


def _flags(analysed: analysis.Analysed, folder: Path) -> dict[str, Flag]:
    (result,) = entries_for_folder(analysed.results, folder)
    flags = {
        PERTURBATION: Flag(
            result.comparison.delta, result.comparison.mcnemar_p, result.verdict == analysis.CONTAMINATED
        )
    }
    for found in entries_for_folder(analysed.detectors, folder):
        flags[found.detector] = Flag(found.signal.signal, found.signal.p_value, found.signal.flagged(ALPHA))
    return flags


def reads_the_options(loaded: Loaded, analysed: analysis.Analysed, clean: Path) -> list[Check]:
    """Item 2's criterion on the clean model: on clear items (those the image decides), CircularEval accuracy
    within READS_OPTIONS of vanilla accuracy, and no significant drop when the options are shuffled."""
    (circular,) = [run for run in entries_for_folder(loaded.detectors, clean) if run.detector == "circular"]
    by_item: dict[str, dict[str, int]] = {}
    for record in circular.records:
        by_item.setdefault(record.original_id, {})[record.variant] = record.correct
    clear = [versions for item, versions in by_item.items() if not draw_varied_scene(item).confusion]
    vanilla = sum(versions["rotation0"] for versions in clear) / len(clear)
    every = sum(all(versions.values()) for versions in clear) / len(clear)
    (shuffle,) = [d for d in entries_for_folder(analysed.detectors, clean) if d.detector == "option_shuffle"]
    significant = shuffle.signal.flagged(ALPHA)
    right = sum(versions["rotation0"] for versions in clear)
    above = scipy_stats.binomtest(right, len(clear), 0.25, alternative="greater").pvalue
    return [
        Check(
            "the clean model answers the clear items above chance (one-sided binomial p < 0.01)",
            above < STRONG,
            f"{right} of {len(clear)} right, p {above:.2g}",
        ),
        Check(
            f"the clean model reads the options: CircularEval within {READS_OPTIONS:.0%} of vanilla on clear items",
            vanilla - every <= READS_OPTIONS,
            f"vanilla {vanilla:.3f}, circular {every:.3f} on {len(clear)} clear items",
        ),
        Check(
            "the clean model's option-shuffle drop is not significant",
            not significant,
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


def exact_interval(hits: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95%."""
    found = scipy_stats.binomtest(hits, n).proportion_ci(0.95, method="exact")
    return float(found.low), float(found.high)


def detectors() -> list[str]:
    return [PERTURBATION, *(DETECTORS[name].label for name in DETECTORS)]


def rates(outcome: RaceOutcome) -> dict[str, dict[str, tuple[int, int]]]:
    """Per detector (by its label), per column (false accusations, then each kind): (flagged, models)."""
    columns = {"false accusations": (CLEAN, race_data.CONTROL), **{kind: (kind,) for kind in race_data.KINDS}}
    keys = {PERTURBATION: PERTURBATION, **{DETECTORS[name].label: name for name in DETECTORS}}
    table: dict[str, dict[str, tuple[int, int]]] = {}
    for label in detectors():
        table[label] = {}
        for column, kinds in columns.items():
            models = [name for name, kind in outcome.kinds.items() if kind in kinds]
            missing = [name for name in models if keys[label] not in outcome.flags[name]]
            if missing:
                raise ValueError(f"{label}: no reading of {', '.join(missing)} (every model runs every detector)")
            table[label][column] = (sum(outcome.flags[name][keys[label]].flagged for name in models), len(models))
    return table


def race_table(outcome: RaceOutcome) -> str:
    table = rates(outcome)
    columns = list(next(iter(table.values())))
    lines = ["| detector | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for label, row in table.items():
        cells = []
        for hits, n in row.values():
            cells.append(
                f"{hits}/{n} [{exact_interval(hits, n)[0]:.2f}, {exact_interval(hits, n)[1]:.2f}]" if n else "-"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", *(f"- [{'x' if c.passed else ' '}] {c.claim}: {c.detail}" for c in outcome.checks)]
    return "\n".join(lines)


def plot(outcome: RaceOutcome, path: Path) -> None:
    """One group of bars per detector: the false-accusation rate, then the detection rate per kind, with
    their exact 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = rates(outcome)
    columns = list(next(iter(table.values())))
    figure, axes = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(columns)
    for c, column in enumerate(columns):
        xs, ys, lows, highs = [], [], [], []
        for d, row in enumerate(table.values()):
            hits, n = row[column]
            if not n:  # no model of this kind
                continue
            low, high = exact_interval(hits, n)
            xs.append(d + (c - (len(columns) - 1) / 2) * width)
            ys.append(hits / n)
            lows.append(hits / n - low)
            highs.append(high - hits / n)
        axes.bar(xs, ys, width, yerr=[lows, highs], capsize=2, label=column.replace("_", " "))
    axes.set_xticks(range(len(table)), list(table), rotation=0)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("share of models flagged (p < 0.05)")
    axes.legend(fontsize=8, ncols=len(columns), loc="upper center", bbox_to_anchor=(0.5, -0.12))
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    plt.close(figure)


def _write(outcome: RaceOutcome, recipe: RaceRecipe, out: Path) -> None:
    plot(outcome, out / "race.png")
    with atomic_path(out / "race.md") as tmp:
        tmp.write_text(race_table(outcome) + "\n")
    summary = {
        "recipe": asdict(recipe),
        "kinds": outcome.kinds,
        "flags": {name: {d: asdict(f) for d, f in flags.items()} for name, flags in outcome.flags.items()},
        "rates": rates(outcome),
        "checks": [asdict(c) for c in outcome.checks],
        "passed": outcome.passed,
        "seconds": round(outcome.seconds, 1),
    }
    with atomic_path(out / "race.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, allow_nan=True) + "\n")
