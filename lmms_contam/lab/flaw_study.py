"""How many flawed counterfactuals does it take to accuse a clean model, and does verification prevent it?

The controlled experiment knows the truth of every counterfactual, so it can measure the method's
one dangerous failure. For each flaw rate fixed in advance, the synthetic test set is built with that
share of flawed counterfactuals (`flaws.py`), verified by `lmms-contam verify`'s own code with the
ideal reader as its judge model (`judge_server.py`), and the clean model, the fresh-data control and
the contaminated models (full and LoRA, top degree) are evaluated by lmms-eval on the whole set once and
read on it and on the items verification kept (one kept subset is also run directly, to show the reading
equals a run). Verdicts are the report's analysis. Models are the experiment's own (`--out` shared with
`demo` or `experiment` reuses them).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyarrow.parquet as pq

from lmms_contam.atomic import atomic_path
from lmms_contam.hosts.readers import read_runs
from lmms_contam.lab import experiment
from lmms_contam.lab.evaluate import PERTURBATION_TASK, complete, evaluate, resolving
from lmms_contam.lab.experiment import CLEAN_ALPHA, FLAG_P, Check, Row, Setup
from lmms_contam.lab.experiment_models import ModelSpec, build_models, plan
from lmms_contam.lab.judge_server import IdealReaderJudge
from lmms_contam.perturb.config import PerturbConfig
from lmms_contam.perturb.verify_set import VerifiedSubset, verify_set
from lmms_contam.report import analysis
from lmms_contam.report.inputs import ModelBenchmark
from lmms_contam.report.set_join import join_all
from lmms_contam.schema import VERIFIED_SUBSET, manifest_beside
from lmms_contam.set_locations import SetLocation, manifest_sha256
from lmms_contam.synthetic import benchmark
from lmms_contam.synthetic.flaws import FLAW_SHARES
from lmms_contam.synthetic.scenes import draw_scene

FLAW_RATES = (0.0, 0.1, 0.2, 0.4)  # fixed before the first run
RECIPE = Path(__file__).parents[1] / "configs" / "perturb" / "paper.yaml"  # its judge prompt and drift check


@dataclass(frozen=True)
class FlawSetup:
    setup: Setup  # recipe and seeds; the models are the clean one, each strategy at `degree`, the control
    rates: tuple[float, ...] = FLAW_RATES

    @property
    def degree(self) -> int:
        return max(self.setup.degrees or self.setup.recipe.degrees)


DEMO_FLAWS = FlawSetup(experiment.DEMO, rates=(0.0, 0.4))
FULL_FLAWS = FlawSetup(replace(experiment.FULL, degrees=(experiment.FULL.recipe.degrees[-1],)))


@dataclass
class Screening:
    """What verification did to one set: which flawed and which good counterfactuals it removed."""

    rate: float
    items: int
    kept: int
    flawed: dict[str, int]  # flaw kind -> items
    flawed_removed: dict[str, int]
    good: int
    good_removed: int
    ambiguous_good: int  # good counterfactuals of the items ambiguous by design (beyond any reader)
    ambiguous_good_removed: int
    outcomes: dict[str, int]  # verify's reasons

    @property
    def flawed_removed_share(self) -> float | None:
        total = sum(self.flawed.values())
        return sum(self.flawed_removed.values()) / total if total else None

    @property
    def good_removed_share(self) -> float:
        return self.good_removed / self.good if self.good else 0.0


@dataclass
class FlawRow:
    rate: float
    verified: bool
    items: int
    row: Row


@dataclass
class FlawOutcome:
    rows: list[FlawRow]
    screenings: list[Screening]
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def first_accusing_rate(self) -> float | None:
        """The smallest flaw rate at which a clean model is flagged (alpha CLEAN_ALPHA) on the unverified set."""
        clean = [r for r in self.rows if not r.verified and r.row.strategy == "clean"]
        return min((r.rate for r in clean if _flagged(r.row, CLEAN_ALPHA)), default=None)


def _flagged(row: Row, alpha: float) -> bool:
    return row.delta < 0 and row.mcnemar_p < alpha


def flawed_set(folder: Path, items: int, rate: float) -> Path:
    """The set at this flaw rate, built unless a complete one with the same settings is there."""
    data = folder / "data.parquet"
    manifest = manifest_beside(data)
    if data.is_file() and manifest.is_file():
        found = json.loads(manifest.read_text())
        if found.get("items") == items and found.get("flaw_rate") == rate:
            return data
    return benchmark.build_test_set(items, data, flaw_rate=rate)


def screening(rate: float, data: Path, verified: VerifiedSubset) -> Screening:
    kept = set(
        pq.read_table(data.parent / VERIFIED_SUBSET / "data.parquet", columns=["item_id"])["item_id"].to_pylist()
    )
    ids = pq.read_table(data, columns=["item_id"])["item_id"].to_pylist()
    record = benchmark.flaws_path(data)
    kinds: dict[str, str] = json.loads(record.read_text())["items"] if record.is_file() else {}
    flawed = {kind: [i for i in ids if kinds.get(i) == kind] for kind in FLAW_SHARES}
    good = [i for i in ids if i not in kinds]
    ambiguous = [i for i in good if draw_scene(i).confusion]
    return Screening(
        rate=rate,
        items=len(ids),
        kept=len(kept),
        flawed={k: len(v) for k, v in flawed.items()},
        flawed_removed={k: sum(i not in kept for i in v) for k, v in flawed.items()},
        good=len(good),
        good_removed=sum(i not in kept for i in good),
        ambiguous_good=len(ambiguous),
        ambiguous_good_removed=sum(i not in kept for i in ambiguous),
        outcomes=verified.outcomes,
    )


def check_flaw_study(rows: list[FlawRow]) -> list[Check]:
    """The study's claims: verified sets clear clean models and controls and still flag contaminated models."""
    checks = []
    for r in rows:
        where = f"f = {r.rate:.2f}, {'verified' if r.verified else 'unverified'}"
        detail = f"delta {r.row.delta:+.3f}, p {r.row.mcnemar_p:.3g}, {r.items} items"
        innocent = r.row.strategy in ("clean", "control")
        if innocent and (r.verified or r.rate == 0):
            checks.append(
                Check(
                    f"{r.row.model} (seed {r.row.seed}) not flagged at {where}",
                    not _flagged(r.row, CLEAN_ALPHA),
                    detail,
                )
            )
        elif not innocent and r.verified:
            checks.append(
                Check(
                    f"{r.row.model} (seed {r.row.seed}) flagged at p < {FLAG_P} at {where}",
                    _flagged(r.row, FLAG_P),
                    detail,
                )
            )
    return checks


def run_flaw_study(study: FlawSetup, out: str | Path) -> FlawOutcome:
    """Build (or reuse) the models, sets, verifications and evaluations under `out`; write flaws.json."""
    started = time.monotonic()
    out = Path(out).resolve()  # lmms-eval records model folders as given: one spelling across runs
    setup = study.setup
    experiment.claim_folder(out, setup)
    specs: list[ModelSpec] = []
    folders: dict[str, Path] = {}
    for seed in setup.seeds:
        seed_specs = plan(setup.recipe, seed, setup.strategies, setup.control, (study.degree,))
        built = build_models(seed_specs, setup.recipe, out / "models")
        specs += seed_specs
        folders |= {f"seed{seed}-{name}": folder for name, folder in built.items()}
    recipe = PerturbConfig.from_yaml(RECIPE)
    sets: dict[float, Path] = {}
    screenings = []
    with IdealReaderJudge() as judge:
        for rate in study.rates:
            sets[rate] = flawed_set(out / "flaws" / f"f{rate:.2f}", setup.recipe.test_items, rate)
            verified = verify_set(sets[rate].parent, replace(recipe, judge_endpoint=judge.endpoint), 0.0)
            screenings.append(screening(rate, sets[rate], verified))
    rows, entries = [], {}
    for rate in study.rates:
        entries[rate] = unverified_runs(rate, sets[rate], specs, folders, out)
        rows += _flaw_rows(rate, sets[rate], specs, entries[rate], out)
    worst = max(study.rates)  # the most items removed: the largest test of reading a subset from the whole run
    clean = next(s for s in specs if s.seed == setup.seeds[0] and s.strategy == "clean")
    model, what = folders[f"seed{clean.seed}-{clean.name}"], f"the verified set of f = {worst:.2f}"
    direct = shortcut_check(what, sets[worst].parent, clean, model, entries[worst], out)
    outcome = FlawOutcome(
        rows=rows, screenings=screenings, checks=[direct, *check_flaw_study(rows)], seconds=time.monotonic() - started
    )
    summary = {
        "setup": asdict(study),
        "flaw_shares": FLAW_SHARES,
        "screenings": [
            asdict(s) | {"flawed_removed_share": s.flawed_removed_share, "good_removed_share": s.good_removed_share}
            for s in screenings
        ],
        "rows": [asdict(r) for r in rows],
        "first_accusing_rate": outcome.first_accusing_rate(),
        "checks": [asdict(c) for c in outcome.checks],
        "passed": outcome.passed,
        "seconds": round(outcome.seconds, 1),
    }
    with atomic_path(out / "flaws.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2))
    return outcome


def unverified_runs(
    rate: float, data: Path, specs: list[ModelSpec], folders: dict[str, Path], out: Path
) -> list[ModelBenchmark]:
    """Every model through lmms-eval on the unverified set at this rate (one subprocess, reused when there), or the
    experiment's own runs of these models where this set is its test set by content (the unflawed one is). Every
    record is joined to this set as the report joins it (manifest, item, gold), so a run of another set is refused."""
    label = f"f{rate:.2f}-unverified"
    outputs = (
        experiment_runs(data, specs, out)
        or evaluate(
            folders,
            {name: (PERTURBATION_TASK,) for name in folders},
            data,
            out / "flaws" / "eval" / label,
            out / "logs" / f"lmms-eval-flaws-{label}.log",
        ).values()
    )
    loaded = read_runs(outputs)
    with resolving(data):
        join_all(loaded)
    return loaded.benchmarks


def experiment_runs(data: Path, specs: list[ModelSpec], out: Path) -> list[Path]:
    """The experiment's complete lmms-eval runs of these models when `data` holds its test set by content (the
    same manifest digest), so that evaluation is not repeated; none otherwise."""
    test_set = experiment.test_set_path(out, json.loads(manifest_beside(data).read_text())["items"])
    if not test_set.is_file() or set_digest(test_set) != set_digest(data):
        return []
    runs = {experiment.evaluation_folder(out, spec.seed) / spec.name: spec.folder(out / "models") for spec in specs}
    return list(runs) if all(complete(run, (PERTURBATION_TASK,), model) for run, model in runs.items()) else []


def set_digest(data: Path) -> str | None:
    return manifest_sha256(SetLocation("parquet", str(data), "the flaw study"))


def _restricted(entry: ModelBenchmark, kept: set[str]) -> ModelBenchmark:
    return replace(entry, items={i: versions for i, versions in entry.items.items() if i in kept})


def restricted_rows(specs: list[ModelSpec], entries: list[ModelBenchmark], kept: set[str], models: Path) -> list[Row]:
    """Each model's verdict on the kept items, by the report's own analysis (Holm across one benchmark: none): a
    reply does not depend on which other items a set holds, so a subset is read from the whole set's run
    (`shortcut_check` runs one subset directly to show it)."""
    rows = []
    for spec in specs:
        entry = experiment.only_entry(experiment.entries_of(spec, entries, models), spec, models)
        (result,) = analysis.decide([analysis.analyse(_restricted(entry, kept))], CLEAN_ALPHA)
        rows.append(experiment.row_of(spec, result, []))
    return rows


def shortcut_check(
    what: str, folder: Path, spec: ModelSpec, model_folder: Path, entries: list[ModelBenchmark], out: Path
) -> Check:
    """lmms-eval on one verified subset directly (`folder`'s): every item's correctness equals the restricted
    run's."""
    subset = folder / VERIFIED_SUBSET / "data.parquet"
    name = f"seed{spec.seed}-{spec.name}"
    outputs = evaluate(
        {name: model_folder},
        {name: (PERTURBATION_TASK,)},
        subset,
        folder / "direct-eval",
        out / "logs" / f"lmms-eval-direct-{folder.name}.log",
    )
    (direct,) = read_runs(outputs.values()).benchmarks
    restricted = _restricted(
        experiment.only_entry(experiment.entries_of(spec, entries, out / "models"), spec, out / "models"),
        set(direct.items),
    )
    correct = lambda entry: {(i, v): r.correct for i, vs in entry.items.items() for v, r in vs.items()}  # noqa: E731
    theirs = correct(direct)
    differing = sum(theirs.get(key) != value for key, value in correct(restricted).items())
    same = set(direct.items) == set(restricted.items) and not differing
    return Check(
        f"lmms-eval on {what} scores {spec.name} as the restricted run does",
        same,
        f"{len(direct.items)} items, {differing} versions scored differently",
    )


def _flaw_rows(rate: float, data: Path, specs: list[ModelSpec], entries: list[ModelBenchmark], out: Path):
    """Every model's row on the set at this rate, before verification and on the items it kept."""
    items = set(pq.read_table(data, columns=["item_id"])["item_id"].to_pylist())
    kept = set(
        pq.read_table(data.parent / VERIFIED_SUBSET / "data.parquet", columns=["item_id"])["item_id"].to_pylist()
    )
    return [
        FlawRow(rate=rate, verified=verified, items=len(ids), row=row)
        for verified, ids in ((False, items), (True, kept))
        for row in restricted_rows(specs, entries, ids, out / "models")
    ]


def flaw_table(outcome: FlawOutcome) -> str:
    """What verification removed at each rate, the false-accusation curve, then the checks."""
    lines = [
        "Verification (lmms-contam verify, the ideal reader as judge, the recipe's drift check):",
        "",
        "| flaw rate | items | flawed (unchanged, third option, ambiguous, removed) | flawed removed | "
        "good removed (of them ambiguous by design) | kept |",
        "|---|---|---|---|---|---|",
    ]
    for s in outcome.screenings:
        kinds = ", ".join(f"{s.flawed_removed[k]}/{s.flawed[k]}" for k in FLAW_SHARES)
        share = "-" if s.flawed_removed_share is None else f"{s.flawed_removed_share:.1%}"
        lines.append(
            f"| {s.rate:.2f} | {s.items} | {sum(s.flawed.values())} ({kinds} removed) | {share} | "
            f"{s.good_removed}/{s.good} = {s.good_removed_share:.1%} ({s.ambiguous_good_removed}/"
            f"{s.ambiguous_good}) | {s.kept} |"
        )
    lines += [
        "",
        "The false-accusation curve (delta, McNemar p and verdict per seed):",
        "",
        "| flaw rate | set | model | items | delta (per seed) | McNemar p (per seed) | verdicts |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple, list[FlawRow]] = {}
    for r in outcome.rows:
        groups.setdefault((r.rate, r.verified, r.row.model), []).append(r)
    for (rate, verified, model), group in groups.items():
        deltas = [g.row.delta for g in group]
        mean = sum(deltas) / len(deltas)
        lines.append(
            f"| {rate:.2f} | {'verified' if verified else 'unverified'} | {model} | {group[0].items} | "
            f"{mean:+.3f} ({', '.join(f'{d:+.3f}' for d in deltas)}) | "
            f"{', '.join(f'{g.row.mcnemar_p:.2g}' for g in group)} | "
            f"{', '.join(g.row.verdict for g in group)} |"
        )
    first = outcome.first_accusing_rate()
    lines += [
        "",
        "A clean model is first flagged on the unverified set at flaw rate "
        + (f"{first:.2f}" if first is not None else "never (none of the rates)")
        + ".",
    ]
    lines.append("")
    lines += [f"- [{'x' if c.passed else ' '}] {c.claim}: {c.detail}" for c in outcome.checks]
    return "\n".join(lines)
