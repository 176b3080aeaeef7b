"""How good must the verifying judge be? False accusations and misses against the judge's error rate.

The flaw study's judge is the ideal reader, which never errs. Real judges do, in two ways: they keep a
flawed counterfactual (false accusations come back) or reject a good one (fewer items, weaker evidence).
Here the ideal reader is given both errors at known rates (`judge_server.JudgeErrors`), each judge
verifies the flaw study's sets through `verify`'s own code, and every model's verdict is the report's on
the items that judge kept.

Every verified set is a subset of its unverified set, and a model's reply to an item does not depend on
which other items a run holds (greedy decoding, batch size 1): so each model is evaluated by lmms-eval once
per flaw rate, on the unverified set, and each judge's cell is that run restricted to the items the judge
kept. A check runs lmms-eval on one judge's verified set directly and compares every item's correctness.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyarrow.parquet as pq

from lmms_contam.atomic import atomic_path
from lmms_contam.lab import experiment
from lmms_contam.lab.experiment import CLEAN_ALPHA, FLAG_P, Check, Row
from lmms_contam.lab.experiment_models import ModelSpec, build_models, plan
from lmms_contam.lab.flaw_study import (
    DEMO_FLAWS,
    FULL_FLAWS,
    RECIPE,
    FlawSetup,
    flawed_set,
    restricted_rows,
    shortcut_check,
    unverified_runs,
)
from lmms_contam.lab.judge_server import IdealReaderJudge, JudgeErrors, calibration_truths, truths_of
from lmms_contam.perturb.config import PerturbConfig
from lmms_contam.perturb.verify_set import verify_set
from lmms_contam.schema import VERIFIED_SUBSET, manifest_beside
from lmms_contam.synthetic import benchmark
from lmms_contam.synthetic.calibration import calibrate, calibration_items

# Fixed before the first run, so no setting is chosen after seeing a result.
KEEP_FLAWED = (0.0, 0.05, 0.1, 0.2, 0.4)
REJECT_GOOD = (0.0, 0.1, 0.3)
INNOCENT = ("clean", "control")
CALIBRATION_ITEMS = 200  # what `verify --calibrate` would measure for each judge


@dataclass(frozen=True)
class JudgeStudy:
    flaws: FlawSetup  # the models and the flaw study's sets; `rates` are the flaw rates judged here
    rates: tuple[float, ...] = (0.2, 0.4)
    keep_flawed: tuple[float, ...] = KEEP_FLAWED
    reject_good: tuple[float, ...] = REJECT_GOOD

    @property
    def judges(self) -> list[tuple[float, float]]:
        return [(keep, reject) for keep in self.keep_flawed for reject in self.reject_good]


DEMO_JUDGES = JudgeStudy(DEMO_FLAWS, rates=(0.4,), keep_flawed=(0.0, 0.2), reject_good=(0.0, 0.3))
FULL_JUDGES = JudgeStudy(FULL_FLAWS)


@dataclass
class Cell:
    """One judge's verification of one set, for one seed's models."""

    rate: float
    keep_flawed: float
    reject_good: float
    seed: int
    items: int
    kept: int
    flawed: int
    flawed_kept: int
    good: int
    good_kept: int
    calibration: dict  # the judge's error rates as `verify --calibrate` measures them
    rows: list[Row] = field(default_factory=list)


@dataclass
class JudgeOutcome:
    cells: list[Cell]
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def safe_keep_flawed(self) -> float | None:
        """The largest keep_flawed rate at which, and below which, no clean model or control is flagged
        (p < CLEAN_ALPHA) at any flaw rate, reject_good rate or seed; None when even a perfect keeper is not."""
        safe = None
        for keep in sorted({c.keep_flawed for c in self.cells}):
            rows = [r for c in self.cells if c.keep_flawed == keep for r in c.rows if r.strategy in INNOCENT]
            if any(_flagged(r, CLEAN_ALPHA) for r in rows):
                break
            safe = keep
        return safe

    def safe_calibrated_keep_flawed(self) -> float | None:
        """The largest safe judge's keep rate as `verify --calibrate` measures it (the mean over its seeds):
        what a user's calibration is compared with."""
        safe = self.safe_keep_flawed()
        if safe is None:
            return None
        return _mean([c.calibration["keep_flawed"] for c in self.cells if c.keep_flawed == safe])


def _flagged(row: Row, alpha: float) -> bool:
    return row.delta < 0 and row.mcnemar_p < alpha


def _judged_folder(out: Path, source: Path, rate: float, errors: JudgeErrors) -> Path:
    """A folder of its own per judge and seed, linking the flawed set: `verify` writes its subset there."""
    judge = f"seed{errors.seed}-keep{errors.keep_flawed:.2f}-reject{errors.reject_good:.2f}"
    folder = out / "judges" / f"f{rate:.2f}" / judge
    folder.mkdir(parents=True, exist_ok=True)
    for path in (source, manifest_beside(source), benchmark.flaws_path(source)):
        if path.is_file() and not (folder / path.name).exists():
            (folder / path.name).symlink_to(path)
    return folder


def judged_subset(folder: Path, errors: JudgeErrors, recipe: PerturbConfig) -> tuple[set[str], dict]:
    """The items this judge keeps, and its calibration (`verify --calibrate` with this judge): measured once
    and recorded in the verified subset's manifest, read back on a rerun."""
    subset = folder / VERIFIED_SUBSET / "data.parquet"
    if not (subset.is_file() and "calibration" in _verification(subset)):
        truths = truths_of(folder / "data.parquet") | calibration_truths(calibration_items(CALIBRATION_ITEMS))
        with IdealReaderJudge(errors, truths) as judge:
            config = replace(recipe, judge_endpoint=judge.endpoint)
            measured = calibrate(config, folder / "verify-work", CALIBRATION_ITEMS, None, 0.0)
            verify_set(folder, config, 0.0, measured.as_record())
    kept = set(pq.read_table(subset, columns=["item_id"])["item_id"].to_pylist())
    return kept, _verification(subset)["calibration"]


def _verification(subset: Path) -> dict:
    """The verification record beside a verified subset; empty when there is none yet."""
    manifest = manifest_beside(subset)
    return json.loads(manifest.read_text()).get("verification", {}) if manifest.is_file() else {}


def check_judge_study(cells: list[Cell]) -> list[Check]:
    """With the ideal reader (no errors) no clean model or control is flagged, and every contaminated model is."""
    checks = []
    for cell in (c for c in cells if c.keep_flawed == 0 and c.reject_good == 0):
        for row in cell.rows:
            where = f"f = {cell.rate:.2f}, the ideal reader"
            detail = f"delta {row.delta:+.3f}, p {row.mcnemar_p:.3g}, {cell.kept} items"
            if row.strategy in INNOCENT:
                checks.append(
                    Check(
                        f"{row.model} (seed {row.seed}) not flagged at {where}", not _flagged(row, CLEAN_ALPHA), detail
                    )
                )
            else:
                checks.append(
                    Check(
                        f"{row.model} (seed {row.seed}) flagged at p < {FLAG_P} at {where}",
                        _flagged(row, FLAG_P),
                        detail,
                    )
                )
    return checks


def run_judge_study(study: JudgeStudy, out: str | Path) -> JudgeOutcome:
    """Build (or reuse) the models, the flawed sets, each judge's verification and the evaluations under
    `out`; write judges.json."""
    started = time.monotonic()
    out = Path(out).resolve()
    setup = study.flaws.setup
    experiment.claim_folder(out, setup)
    specs, folders = _models(study, out)
    recipe = PerturbConfig.from_yaml(RECIPE)
    cells, checks = [], []
    for rate in study.rates:
        data = flawed_set(out / "flaws" / f"f{rate:.2f}", setup.recipe.test_items, rate)
        entries = unverified_runs(rate, data, specs, folders, out)
        flawed = set(json.loads(benchmark.flaws_path(data).read_text())["items"])
        ids = set(pq.read_table(data, columns=["item_id"])["item_id"].to_pylist())
        for seed in setup.seeds:
            for keep, reject in study.judges:
                errors = JudgeErrors(keep, reject, seed)
                folder = _judged_folder(out, data, rate, errors)
                kept, calibrated = judged_subset(folder, errors, recipe)
                seed_specs = [s for s in specs if s.seed == seed]
                cells.append(
                    Cell(
                        rate=rate,
                        keep_flawed=keep,
                        reject_good=reject,
                        seed=seed,
                        items=len(ids),
                        kept=len(kept),
                        flawed=len(flawed),
                        flawed_kept=len(kept & flawed),
                        good=len(ids - flawed),
                        good_kept=len(kept - flawed),
                        calibration=calibrated,
                        rows=restricted_rows(seed_specs, entries, kept, out / "models"),
                    )
                )
        worst = max(study.judges)  # the most flawed items kept: the largest test of the shortcut
        folder = _judged_folder(out, data, rate, JudgeErrors(*worst, setup.seeds[0]))
        clean = next(s for s in specs if s.seed == setup.seeds[0] and s.strategy == "clean")
        cell = next(c for c in cells if (c.rate, c.keep_flawed, c.reject_good, c.seed) == (rate, *worst, clean.seed))
        what = f"the verified set of keep_flawed {cell.keep_flawed}, reject_good {cell.reject_good} (f = {rate:.2f})"
        checks.append(shortcut_check(what, folder, clean, folders[f"seed{clean.seed}-{clean.name}"], entries, out))
    outcome = JudgeOutcome(cells, checks + check_judge_study(cells), time.monotonic() - started)
    _write_summary(study, outcome, out / "judges.json")
    plot(outcome, out / "judges.png")
    return outcome


def _models(study: JudgeStudy, out: Path) -> tuple[list[ModelSpec], dict[str, Path]]:
    """The flaw study's models (trained once, reused), by seed-qualified name."""
    setup = study.flaws.setup
    specs: list[ModelSpec] = []
    folders: dict[str, Path] = {}
    for seed in setup.seeds:
        seed_specs = plan(setup.recipe, seed, setup.strategies, setup.control, (study.flaws.degree,))
        built = build_models(seed_specs, setup.recipe, out / "models")
        specs += seed_specs
        folders |= {f"seed{seed}-{name}": folder for name, folder in built.items()}
    return specs, folders


def _write_summary(study: JudgeStudy, outcome: JudgeOutcome, path: Path) -> None:
    """judges.json: what the tests and a later reader check, written whole or not at all."""
    summary = {
        "setup": asdict(study),
        "cells": [asdict(c) for c in outcome.cells],
        "safe_keep_flawed": outcome.safe_keep_flawed(),
        "safe_calibrated_keep_flawed": outcome.safe_calibrated_keep_flawed(),
        "checks": [asdict(c) for c in outcome.checks],
        "passed": outcome.passed,
        "seconds": round(outcome.seconds, 1),
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(summary, indent=2))


def plot(outcome: JudgeOutcome, path: Path) -> Path:
    """Each model's mean delta against the judge's keep_flawed rate, one panel per flaw rate, one line style per
    reject_good rate; a filled marker where every seed is flagged, hollow where some are, none where none is."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({c.rate for c in outcome.cells})
    models = list(dict.fromkeys(r.model for c in outcome.cells for r in c.rows))
    styles = dict(zip(sorted({c.reject_good for c in outcome.cells}), ("-", "--", ":", "-."), strict=False))
    figure, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.2), squeeze=False, sharey=True)
    for axis, rate in zip(axes[0], rates, strict=True):
        for index, model in enumerate(models):
            colour = f"C{index}"
            for reject, style in styles.items():
                cells = sorted(
                    (c for c in outcome.cells if c.rate == rate and c.reject_good == reject),
                    key=lambda c: c.keep_flawed,
                )
                keeps = sorted({c.keep_flawed for c in cells})
                rows = {k: [r for c in cells if c.keep_flawed == k for r in c.rows if r.model == model] for k in keeps}
                deltas = [_mean([r.delta for r in rows[k]]) for k in keeps]
                axis.plot(keeps, deltas, style, color=colour, label=f"{model}, reject_good {reject:.0%}")
                for k, delta in zip(keeps, deltas, strict=True):
                    alpha = CLEAN_ALPHA if rows[k][0].strategy in INNOCENT else FLAG_P
                    flagged = sum(_flagged(r, alpha) for r in rows[k])
                    if flagged:
                        axis.plot(
                            [k],
                            [delta],
                            "o",
                            color=colour,
                            markerfacecolor=colour if flagged == len(rows[k]) else "white",
                        )
        axis.axhline(0, color="grey", linewidth=0.8)
        axis.set_title(f"{rate:.0%} of the counterfactuals flawed")
        axis.set_xlabel("judge keeps this share of flawed counterfactuals (keep_flawed)")
    axes[0][0].set_ylabel("delta on the judge's verified set (mean over seeds)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def judge_table(outcome: JudgeOutcome) -> str:
    """Per flaw rate and judge: the items kept, each model's mean delta, and how many seeds flag it."""
    models = list(dict.fromkeys(r.model for c in outcome.cells for r in c.rows))
    lines = [
        "Judges with known errors (the ideal reader keeping flawed / rejecting good counterfactuals at the given "
        "rates), each verifying through `verify`'s own code; per cell the mean over seeds, the range of "
        "McNemar p and how many seeds the report flags:",
        "",
        "| flaw rate | keep_flawed | reject_good | as --calibrate measures them | kept (flawed kept / flawed, "
        "good kept / good) | " + " | ".join(models) + " |",
        "|---|---|---|---|---|" + "---|" * len(models),
    ]
    groups: dict[tuple, list[Cell]] = {}
    for cell in outcome.cells:
        groups.setdefault((cell.rate, cell.keep_flawed, cell.reject_good), []).append(cell)
    for (rate, keep, reject), group in groups.items():
        kept = (
            f"{_mean([c.kept for c in group]):.0f} ({_mean([c.flawed_kept for c in group]):.0f} / "
            f"{group[0].flawed}, {_mean([c.good_kept for c in group]):.0f} / {group[0].good})"
        )
        cells = []
        for model in models:
            rows = [r for c in group for r in c.rows if r.model == model]
            p = sorted(r.mcnemar_p for r in rows)
            flagged = sum(_flagged(r, CLEAN_ALPHA if r.strategy in INNOCENT else FLAG_P) for r in rows)
            cells.append(f"{_mean([r.delta for r in rows]):+.3f}, p {p[0]:.2g}-{p[-1]:.2g}, {flagged}/{len(rows)}")
        calibrated = (
            f"{_mean([c.calibration['keep_flawed'] for c in group]):.3f}, "
            f"{_mean([c.calibration['reject_good'] for c in group]):.3f}"
        )
        lines.append(f"| {rate:.2f} | {keep:.2f} | {reject:.2f} | {calibrated} | {kept} | " + " | ".join(cells) + " |")
    safe, measured = outcome.safe_keep_flawed(), outcome.safe_calibrated_keep_flawed()
    lines += [
        "",
        "Flagged: clean and control at p < 0.05, contaminated models at p < 0.01. The largest keep_flawed "
        "rate at which no clean model or control is flagged: "
        + (f"{safe:.2f} ({measured:.3f} as --calibrate measures it)" if safe is not None else "none of the rates")
        + ".",
        "",
    ]
    lines += [f"- [{'x' if c.passed else ' '}] {c.claim}: {c.detail}" for c in outcome.checks]
    return "\n".join(lines)
