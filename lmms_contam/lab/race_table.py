"""The detector race's table and plot: which models each detector flags, per column (false accusations on clean
models and controls, detections per kind of contamination), each share with its exact 95% interval."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.circular import CIRCULAR
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.lab import race_data
from lmms_contam.stats import clopper_pearson

if TYPE_CHECKING:
    from lmms_contam.lab.experiment import Check

PERTURBATION = "semantic perturbation"
# CircularEval measured against the clean model's own drop (the report's --circular-reference), not against no
# drop: the clean model is its reference, so its row's false accusations are the controls'.
CIRCULAR_VS_CLEAN = "CircularEval vs the clean model"


@dataclass
class Flag:
    signal: float
    p_value: float
    flagged: bool


@dataclass
class RaceOutcome:
    flags: dict[str, dict[str, Flag]]  # model name -> detector (or PERTURBATION) -> its reading
    kinds: dict[str, str]  # model name -> its kind (CLEAN, a kind of contamination, or the control)
    scores: dict[str, float]  # model name -> accuracy on the original items
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def exact_interval(hits: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95%."""
    low, high = clopper_pearson(hits, n)
    return float(low), float(high)


def detectors() -> list[str]:
    labels = [PERTURBATION]
    for name, detector in DETECTORS.items():
        labels += [detector.label, CIRCULAR_VS_CLEAN] if name == CIRCULAR else [detector.label]
    return labels


def rates(outcome: RaceOutcome) -> dict[str, dict[str, tuple[int, int]]]:
    """Per detector (by its label), per column (false accusations, then each kind): (flagged, models)."""
    columns = {"false accusations": (race_data.CLEAN, race_data.CONTROL), **{kind: (kind,) for kind in race_data.KINDS}}
    keys = {PERTURBATION: PERTURBATION, CIRCULAR_VS_CLEAN: CIRCULAR_VS_CLEAN}
    keys |= {DETECTORS[name].label: name for name in DETECTORS}
    table: dict[str, dict[str, tuple[int, int]]] = {}
    for label in detectors():
        table[label] = {}
        for column, kinds in columns.items():
            models = [
                name
                for name, kind in outcome.kinds.items()
                if kind in kinds and not (label == CIRCULAR_VS_CLEAN and kind == race_data.CLEAN)
            ]
            missing = [name for name in models if keys[label] not in outcome.flags[name]]
            if missing:
                raise ValueError(f"{label}: no reading of {', '.join(missing)} (every model runs every detector)")
            table[label][column] = (sum(outcome.flags[name][keys[label]].flagged for name in models), len(models))
    return table


def _cell(hits: int, n: int) -> str:
    if not n:  # no model of this kind
        return "-"
    low, high = exact_interval(hits, n)
    return f"{hits}/{n} [{low:.2f}, {high:.2f}]"


def inflation(outcome: RaceOutcome) -> dict[str, tuple[float, float]]:
    """Per kind of model: (its mean accuracy on the original items, that minus the controls' mean). A detector
    can only be asked to find a leak that did something: this says how much each kind raised the score."""
    by_kind: dict[str, list[float]] = {}
    for name, kind in outcome.kinds.items():
        by_kind.setdefault(kind, []).append(outcome.scores[name])
    means = {kind: sum(scores) / len(scores) for kind, scores in by_kind.items()}
    return {kind: (mean, mean - means[race_data.CONTROL]) for kind, mean in means.items()}


def race_table(outcome: RaceOutcome) -> str:
    table = rates(outcome)
    columns = list(next(iter(table.values())))
    lines = ["| detector | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for label, row in table.items():
        lines.append(f"| {label} | " + " | ".join(_cell(hits, n) for hits, n in row.values()) + " |")
    lines += ["", "| model kind | accuracy on the original items (mean) | minus the controls' |", "|---|---|---|"]
    lines += [f"| {kind} | {mean:.3f} | {gain:+.3f} |" for kind, (mean, gain) in inflation(outcome).items()]
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
    figure, axes = plt.subplots(figsize=(11, 4.4))
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
    axes.set_xticks(range(len(table)), [textwrap.fill(label, 16) for label in table], rotation=0)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("share of models flagged (p < 0.05)")
    axes.legend(fontsize=8, ncols=len(columns), loc="upper center", bbox_to_anchor=(0.5, -0.2))
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    plt.close(figure)
