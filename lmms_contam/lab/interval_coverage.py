"""How often the report's intervals hold the true value, by simulation with the report's own functions.

Benchmarks of n paired items, with given accuracies on the originals and the counterfactuals, and a given share of
the pairs the model answers differently (from the least the two accuracies allow to the most); with or without
strata of unequal size whose accuracies differ, macro-averaged as MMStar's l2 categories are. Each cell draws
`sims` benchmarks and counts the intervals that hold the truth. `python -m lmms_contam.lab.interval_coverage` prints
the table in docs/results/interval-coverage.md.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass

import numpy as np

from lmms_contam import stats

SIZES = (8, 12, 20, 30, 50, 100, 300, 1000)
ACCURACIES = (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)
# Where the share of right-on-both pairs sits between its least (most discordance) and its most (least).
AGREEMENT = (0.0, 0.5, 1.0)
DESIGNS = ("one stratum", "unequal strata")
ACCURACY_SIMS = 10_000


@dataclass(frozen=True)
class Cell:
    n: int
    acc_original: float
    acc_perturbed: float
    agreement: float
    design: str


@dataclass(frozen=True)
class Measured:
    cell: Cell
    coverage: float
    width: float
    out_of_range: int  # intervals leaving [0, 1] (an accuracy) or [-1, 1] (a delta)


def strata_sizes(n: int, design: str) -> np.ndarray:
    """Strata of sizes in proportion 1:2:...:k (the smallest of a few items), k growing with n."""
    if design == "one stratum":
        return np.array([n])
    k = 3 if n < 30 else 6 if n < 300 else 18
    sizes = np.maximum(1, np.floor(np.arange(1, k + 1) / (k * (k + 1) / 2) * n)).astype(int)
    sizes[-1] += n - sizes.sum()
    return sizes


def _spread(accuracy: float, k: int) -> np.ndarray:
    """Each stratum's accuracy: spread around the cell's by up to half its distance to 0 or 1."""
    if k == 1:
        return np.array([accuracy])
    offsets = np.linspace(-0.5, 0.5, k)
    room = min(accuracy, 1 - accuracy)
    return accuracy + offsets * room


def _cell_probabilities(p: np.ndarray, q: np.ndarray, agreement: float) -> np.ndarray:
    """Per stratum: P(right on both), P(lost), P(gained), P(wrong on both)."""
    most, least = np.minimum(p, q), np.maximum(0.0, p + q - 1)
    both = least + agreement * (most - least)
    cells = np.stack([both, p - both, q - both, 1 - p - q + both], axis=-1)
    cells = np.clip(cells, 0.0, None)
    return cells / cells.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class Drawn:
    counts: np.ndarray  # per simulated benchmark and stratum: right on both, lost, gained, wrong on both
    trials: np.ndarray  # each stratum's size, per simulated benchmark
    weight: np.ndarray  # each stratum's weight in the macro average
    truth_original: float
    truth_perturbed: float


def _draw(cell: Cell, sims: int) -> Drawn:
    sizes = strata_sizes(cell.n, cell.design)
    p, q = _spread(cell.acc_original, sizes.size), _spread(cell.acc_perturbed, sizes.size)
    probabilities = _cell_probabilities(p, q, cell.agreement)
    rng = np.random.default_rng(stats.stable_seed("interval coverage", repr(cell)))
    counts = np.stack([rng.multinomial(s, c, sims) for s, c in zip(sizes, probabilities, strict=True)], axis=1)
    return Drawn(
        counts=counts,
        trials=np.broadcast_to(sizes, counts.shape[:2]),
        weight=np.full(counts.shape[:2], 1 / sizes.size),
        truth_original=float(p.mean()),
        truth_perturbed=float(q.mean()),
    )


def _measured(cell: Cell, low: np.ndarray, high: np.ndarray, truth: float, lowest: float) -> Measured:
    tolerance = 1e-12
    return Measured(
        cell=cell,
        coverage=float(np.mean((low <= truth + tolerance) & (truth - tolerance <= high))),
        width=float(np.mean(high - low)),
        out_of_range=int(np.sum((low < lowest) | (high > 1))),
    )


def measure_accuracy(cell: Cell, sims: int, confidence: float = 0.95) -> Measured:
    """Coverage of the original side's accuracy interval (the perturbed side's is the same function)."""
    d = _draw(cell, sims)
    low, high = stats.weighted_rate_interval(d.counts[..., 0] + d.counts[..., 1], d.trials, d.weight, confidence)
    return _measured(cell, low, high, d.truth_original, 0.0)


def measure_delta(cell: Cell, sims: int, confidence: float = 0.95) -> Measured:
    d = _draw(cell, sims)
    low, high = stats.delta_interval(d.counts[..., 1], d.counts[..., 2], d.trials, d.weight, confidence)
    return _measured(cell, low, high, d.truth_perturbed - d.truth_original, -1.0)


def delta_cells(sizes=SIZES, accuracies=ACCURACIES) -> list[Cell]:
    return [
        Cell(n=n, acc_original=a, acc_perturbed=b, agreement=agreement, design=design)
        for design, n, a, b, agreement in itertools.product(DESIGNS, sizes, accuracies, accuracies, AGREEMENT)
    ]


def accuracy_cells(sizes=SIZES, accuracies=ACCURACIES) -> list[Cell]:
    """One side's accuracy does not depend on the other side's: one cell per design, n and accuracy."""
    return [
        Cell(n=n, acc_original=a, acc_perturbed=a, agreement=1.0, design=design)
        for design, n, a in itertools.product(DESIGNS, sizes, accuracies)
    ]


def coverage_table(accuracy: list[Measured], delta: list[Measured]) -> str:
    """Per design and n: the worst cell's coverage of each interval and the mean widths, in Markdown."""
    lines = [
        "| design | n | worst accuracy coverage | mean accuracy width | worst delta coverage | mean delta width |",
        "|---|---|---|---|---|---|",
    ]
    for design, n in itertools.product(DESIGNS, SIZES):
        rows = [[m for m in measured if (m.cell.design, m.cell.n) == (design, n)] for measured in (accuracy, delta)]
        if all(rows):
            figures = " | ".join(
                f"{min(m.coverage for m in r):.3f} | {np.mean([m.width for m in r]):.3f}" for r in rows
            )
            lines.append(f"| {design} | {n} | {figures} |")
    lines.append("")
    for name, measured in (("accuracy", accuracy), ("delta", delta)):
        worst = min(measured, key=lambda m: m.coverage)
        lines.append(f"Worst {name} cell: {worst.cell} ({worst.coverage:.3f}).")
    lines.append(f"Intervals out of range: {sum(m.out_of_range for m in accuracy + delta)}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sims",
        type=int,
        default=ACCURACY_SIMS,
        help=f"simulated benchmarks per accuracy cell (default {ACCURACY_SIMS}; a delta cell gets a fifth)",
    )
    args = parser.parse_args(argv)
    accuracy = [measure_accuracy(cell, args.sims) for cell in accuracy_cells()]
    delta = [measure_delta(cell, args.sims // 5) for cell in delta_cells()]
    print(coverage_table(accuracy, delta))


if __name__ == "__main__":
    main()
