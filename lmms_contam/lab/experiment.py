"""The controlled-contamination experiment, end to end: data, models, lmms-eval, report, checks.

Does the perturbation delta separate contaminated models from clean ones, and grow with the degree
of contamination? Every model is evaluated by lmms-eval on the plugin's paired task and read back
by the report code; this module only adds the per-model table and the pass/fail checks. The clean,
control and most contaminated models also run the peer detector tasks, to show where each works.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scipy import stats as scipy_stats

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts import inspect_ai, vlmevalkit
from lmms_contam.hosts.base import run_label
from lmms_contam.hosts.lmms_eval import NAME as LMMS_EVAL
from lmms_contam.hosts.readers import read_runs
from lmms_contam.lab.evaluate import (
    DETECTOR_TASKS,
    PERTURBATION_TASK,
    evaluate,
    evaluate_inspect,
    evaluate_vlmevalkit,
    inspect_model,
    llava_args,
    resolving,
)
from lmms_contam.lab.experiment_models import ModelSpec, TrainingRecipe, build_models, plan
from lmms_contam.lab.image_only_rates import image_only_rates
from lmms_contam.report import analysis
from lmms_contam.report.build import build as build_report
from lmms_contam.synthetic import benchmark

FLAG_P = 0.01  # "flagged": delta < 0 with McNemar p below this
CLEAN_ALPHA = 0.05  # clean models and controls must not be significant at this level


@dataclass(frozen=True)
class Setup:
    recipe: TrainingRecipe = TrainingRecipe()
    seeds: tuple[int, ...] = (0, 1, 2)
    strategies: tuple[str, ...] = ("full", "lora")
    degrees: tuple[int, ...] | None = None  # None: the recipe's three degrees
    control: bool = True
    # Which models also run the peer detector tasks: those of these seeds and strategies, at the
    # highest degree (a detector is deterministic given a model, so one seed shows where each works;
    # the three tasks cost 3.5x the evaluation of the perturbation task).
    detector_seeds: tuple[int, ...] = (0,)
    detector_strategies: tuple[str, ...] = ("clean", "full", "lora", "control")
    host: str = LMMS_EVAL  # the harness that evaluates the models (they are trained on its prompt)

    def runs_detectors(self, spec: ModelSpec) -> bool:
        top = max(self.degrees or self.recipe.degrees)
        return (
            spec.seed in self.detector_seeds and spec.strategy in self.detector_strategies and spec.degree in (0, top)
        )


# The demo's detectors: the clean model and one contaminated model, to stay well inside 15 minutes.
DEMO = Setup(
    recipe=TrainingRecipe(test_items=500),
    seeds=(0,),
    degrees=(TrainingRecipe().degrees[-1],),
    detector_strategies=("clean", "full"),
)
FULL = Setup()


@dataclass(frozen=True)
class ServedHost:
    """A harness that asks the models served on 127.0.0.1 through its API model: where its models and runs go
    (under the demo's folder: models trained on another harness's prompt are other models), the package it runs
    from, how it evaluates them, and the name it asks a served model by."""

    folder: str
    package: str
    install: str
    evaluate: Callable[[dict[str, Path], Path, Path, Path], Path]
    asked_as: Callable[[str], str] = str


SERVED_HOSTS = {
    vlmevalkit.NAME: ServedHost(
        folder=vlmevalkit.KEY,
        package="vlmeval",
        install="the README's set-up command (ms-vlmeval)",
        evaluate=evaluate_vlmevalkit,
    ),
    inspect_ai.NAME: ServedHost(
        folder=inspect_ai.KEY,
        package="inspect_ai",
        install='pip install "lmms-contam[inspect]" (Python 3.11+)',
        evaluate=evaluate_inspect,
        asked_as=inspect_model,
    ),
}


def require_host(host: str) -> None:
    """Refuse before any model is trained when the harness that would evaluate them is not installed."""
    served = SERVED_HOSTS.get(host)
    if served and importlib.util.find_spec(served.package) is None:
        raise ValueError(f"{host} is not installed here ({served.package} is missing): {served.install}")


class SetupMismatch(ValueError):
    """The working folder holds models made with other settings; mixing them would be wrong."""


def claim_folder(out: Path, setup: Setup) -> None:
    """Record the recipe on first use; refuse a folder whose models came from another recipe."""
    record = out / "recipe.json"
    wanted = asdict(setup.recipe)
    if record.exists():
        found = json.loads(record.read_text())
        if found != json.loads(json.dumps(wanted)):
            raise SetupMismatch(f"{out} holds models trained with another recipe ({record}); use another --out")
        return
    with atomic_path(record) as tmp:
        tmp.write_text(json.dumps(wanted, indent=2))


@dataclass
class Row:
    model: str
    strategy: str
    degree: int
    seed: int
    acc_original: float
    acc_perturbed: float
    delta: float
    ci: tuple[float, float]
    mcnemar_p: float
    verdict: str
    by_kind: dict[str, float]  # accuracy on the original items per question kind
    kind_p: dict[str, float]  # one-sided binomial p of that accuracy against chance (0.25)
    detectors: dict[str, dict] = field(default_factory=dict)  # peer detector -> signal, p_value, flagged


@dataclass
class Check:
    claim: str
    passed: bool
    detail: str

    def __post_init__(self) -> None:
        self.passed = bool(self.passed)  # numpy comparisons give numpy booleans, which JSON refuses


@dataclass
class Outcome:
    rows: list[Row]
    checks: list[Check] = field(default_factory=list)
    report_html: Path | None = None
    seconds: float = 0.0
    image_only: dict[str, dict] = field(default_factory=dict)  # training data -> the scan's rate

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def row_of(spec: ModelSpec, result: analysis.BenchmarkResult, detectors: list[analysis.DetectorResult]) -> Row:
    c = result.comparison
    by_kind, kind_p = {}, {}
    for category in result.categories:
        by_kind[category.name] = category.acc_original
        hits = round(category.acc_original * category.n)
        kind_p[category.name] = float(scipy_stats.binomtest(hits, category.n, 0.25, alternative="greater").pvalue)
    signals = {
        d.detector: {"signal": d.signal.signal, "p_value": d.signal.p_value, "flagged": d.signal.flagged(CLEAN_ALPHA)}
        for d in detectors
    }
    return Row(
        model=spec.name,
        strategy=spec.strategy,
        degree=spec.degree,
        seed=spec.seed,
        acc_original=c.acc_original,
        acc_perturbed=c.acc_perturbed,
        delta=c.delta,
        ci=(c.ci_low, c.ci_high),
        mcnemar_p=c.mcnemar_p,
        verdict=result.verdict,
        by_kind=by_kind,
        kind_p=kind_p,
        detectors=signals,
    )


def check_experiment(rows: list[Row]) -> list[Check]:
    """The experiment's claims, each as a check that can fail."""
    checks = []
    for row in rows:
        if row.strategy in ("clean", "control"):
            flagged = row.delta < 0 and row.mcnemar_p < CLEAN_ALPHA
            checks.append(
                Check(
                    f"{row.model} (seed {row.seed}) not flagged",
                    not flagged,
                    f"delta {row.delta:+.3f}, p {row.mcnemar_p:.3g}",
                )
            )
            above = all(p < 0.01 for p in row.kind_p.values())
            kinds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(row.by_kind.items()))
            checks.append(Check(f"{row.model} (seed {row.seed}) above chance on every question kind", above, kinds))
    clean = {row.seed: row for row in rows if row.strategy == "clean"}
    for strategy in sorted({r.strategy for r in rows} - {"clean", "control"}):
        ours = [r for r in rows if r.strategy == strategy]
        top = max(r.degree for r in ours)
        for row in (r for r in ours if r.degree == top):
            gain = row.acc_original - clean[row.seed].acc_original
            checks.append(
                Check(
                    f"{row.model} (seed {row.seed}) inflates the original score by at least 0.10",
                    gain >= 0.10,
                    f"{gain:+.3f} over the clean model",
                )
            )
            checks.append(
                Check(
                    f"{row.model} (seed {row.seed}) flagged (delta < 0, McNemar p < {FLAG_P})",
                    row.delta < 0 and row.mcnemar_p < FLAG_P,
                    f"delta {row.delta:+.3f}, p {row.mcnemar_p:.3g}",
                )
            )
        degrees = sorted({r.degree for r in ours})
        if len(degrees) > 1:
            points = [(0, clean[seed].delta) for seed in {r.seed for r in ours}]
            points += [(r.degree, r.delta) for r in ours]
            rho = scipy_stats.spearmanr([d for d, _ in points], [v for _, v in points]).statistic
            checks.append(
                Check(
                    f"{strategy}: delta falls as the degree rises (Spearman <= -0.8, clean = degree 0)",
                    rho <= -0.8,
                    f"rho {rho:.2f} over {len(points)} models",
                )
            )
        seeds = {r.seed for r in ours}
        if len(seeds) > 1:
            by_degree: dict[int, set[str]] = defaultdict(set)
            for row in ours:
                by_degree[row.degree].add(row.verdict)
            same = all(len(v) == 1 for v in by_degree.values())
            detail = "; ".join(f"{d} epochs: {', '.join(sorted(v))}" for d, v in sorted(by_degree.items()))
            checks.append(Check(f"{strategy}: the same verdict for every seed at each degree", same, detail))
    return checks


def rate_check(image_only: dict[str, dict]) -> Check:
    """The corpus-side measure sees what the fine-tuning did: every test image is in the contaminated
    models' training data, none in the clean model's or the control's."""
    rates = {data: r["image_only_rate"] for data, r in image_only.items()}
    passed = rates["contaminated"] == 1.0 and rates["clean"] == 0.0 and rates["control"] == 0.0
    detail = ", ".join(f"{data} {rate:.3f}" for data, rate in rates.items())
    return Check(
        "image-only rate: 1 against the contaminated training data, 0 against clean and control",
        passed,
        f"{detail} (pixel copy detector, threshold {image_only['clean']['threshold']})",
    )


def run_experiment(setup: Setup, out: str | Path) -> Outcome:
    """Build (or reuse) everything under `out`, then write report.{html,md,json} and experiment.json (for
    VLMEvalKit and inspect, with their models and runs, under `out/vlmevalkit` and `out/inspect`)."""
    started = time.monotonic()
    require_host(setup.host)
    out = Path(out).resolve()  # lmms-eval records model folders as given: one spelling across runs
    claim_folder(out, setup)
    recipe = setup.recipe
    test_set = test_set_path(out, recipe.test_items)
    if not test_set.exists():
        benchmark.build_test_set(recipe.test_items, test_set)
    root = out if setup.host == LMMS_EVAL else out / SERVED_HOSTS[setup.host].folder
    models = root / "models"
    specs, eval_dirs = _train_and_evaluate(setup, test_set, out, root)
    with resolving(test_set):  # the report shows flagged image pairs from the set the tasks read
        analysed, _ = build_report(
            read_runs(eval_dirs),
            markdown=root / "report.md",
            json_path=root / "report.json",
            html_path=root / "report.html",
        )
    rows = [
        row_of(
            spec,
            only_entry(entries_of(spec, analysed.results, models, setup.host), spec, models),
            entries_of(spec, analysed.detectors, models, setup.host),
        )
        for spec in specs
    ]
    image_only = image_only_rates(recipe, setup.seeds[0], test_set, out / "scan")
    checks = [*check_experiment(rows), rate_check(image_only)]
    outcome = Outcome(
        rows=rows,
        checks=checks,
        report_html=root / "report.html",
        seconds=time.monotonic() - started,
        image_only=image_only,
    )
    _write_summary(setup, outcome, root / "experiment.json")
    return outcome


def _train_and_evaluate(setup: Setup, test_set: Path, out: Path, root: Path) -> tuple[list[ModelSpec], list[Path]]:
    """Every seed's models, trained or reused, and the folders of the harness's runs on them: what the report
    reads."""
    specs: list[ModelSpec] = []
    eval_dirs: list[Path] = []
    for seed in setup.seeds:
        seed_specs = plan(setup.recipe, seed, setup.strategies, setup.control, setup.degrees)
        folders = build_models(seed_specs, setup.recipe, root / "models", setup.host)
        specs += seed_specs
        log = root / "logs" / f"{setup.host}-seed{seed}.log"
        if setup.host in SERVED_HOSTS:
            served = {served_name(spec): folders[spec.name] for spec in seed_specs}
            eval_dirs.append(SERVED_HOSTS[setup.host].evaluate(served, test_set, evaluation_folder(root, seed), log))
            continue
        tasks = {s.name: (PERTURBATION_TASK, *(DETECTOR_TASKS if setup.runs_detectors(s) else ())) for s in seed_specs}
        eval_dirs += evaluate(folders, tasks, test_set, evaluation_folder(out, seed), log).values()
    return specs, eval_dirs


def test_set_path(out: Path, items: int) -> Path:
    """The experiment's test set of this size: the flaw study finds it here to reuse its runs."""
    return out / "data" / f"synthetic-{items}.parquet"


def evaluation_folder(out: Path, seed: int) -> Path:
    """Where lmms-eval's runs of one seed's models go, one folder per model."""
    return out / "eval" / f"seed{seed}"


def _write_summary(setup: Setup, outcome: Outcome, path: Path) -> None:
    """experiment.json: what the tests and a later reader check, written whole or not at all."""
    summary = {
        "setup": asdict(setup),
        "rows": [asdict(r) for r in outcome.rows],
        "checks": [asdict(c) for c in outcome.checks],
        "image_only": outcome.image_only,
        "passed": outcome.passed,
        "seconds": round(outcome.seconds, 1),
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(summary, indent=2))


def served_name(spec: ModelSpec) -> str:
    """The name a model is served and asked under through an API model: one per model across seeds."""
    return f"{spec.name}-seed{spec.seed}"


def entries_of(spec: ModelSpec, results: list, models: Path, host: str = LMMS_EVAL) -> list:
    """Report entries labelled with this model: lmms-eval names llava_hf runs by the `pretrained` folder, the
    other hosts by the name the served model was asked under."""
    if host in SERVED_HOSTS:
        return [r for r in results if r.model == run_label(SERVED_HOSTS[host].asked_as(served_name(spec)), host)]
    return entries_for_folder(results, spec.folder(models))


def entries_for_folder(results: list, folder: Path) -> list:
    """Report entries (or runs) of the lmms-eval `llava_hf` model in `folder`: named by its `pretrained`."""
    return [r for r in results if r.model == str(folder) or llava_args(folder) in r.model]


def only_entry(found: list, spec: ModelSpec, models: Path) -> analysis.BenchmarkResult:
    """The one run of this model among those read; a clear error otherwise (a ValueError: the command exits 2)."""
    if len(found) != 1:
        raise ValueError(
            f"{len(found)} runs of {spec.name} (seed {spec.seed}, {spec.folder(models)}) among the runs read; "
            "expected one (lmms-eval names a run by the model folder it loaded)"
        )
    return found[0]


def experiment_table(outcome: Outcome) -> str:
    """The paper's table in miniature, then the checks."""
    header = (
        "model",
        "strategy",
        "epochs",
        "seed",
        "acc original",
        "acc perturbed",
        "delta [95% CI]",
        "McNemar p",
        "verdict",
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in outcome.rows:
        cells = (
            r.model,
            r.strategy,
            r.degree,
            r.seed,
            f"{r.acc_original:.3f}",
            f"{r.acc_perturbed:.3f}",
            f"{r.delta:+.3f} [{r.ci[0]:+.3f}, {r.ci[1]:+.3f}]",
            f"{r.mcnemar_p:.2g}",
            r.verdict,
        )
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    with_detectors = [r for r in outcome.rows if r.detectors]
    if with_detectors:
        ran = [name for name in DETECTORS if any(name in r.detectors for r in with_detectors)]
        header = ("model", "seed", "semantic perturbation", *(DETECTORS[name].label for name in ran))
        lines += [
            "",
            "Peer detectors (signal, p, flag at p < 0.05):",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        for r in with_detectors:
            cells = [r.model, str(r.seed), f"{r.delta:+.3f}, p {r.mcnemar_p:.2g}, {r.verdict}"]
            for name in ran:
                d = r.detectors.get(name)
                cells.append(
                    f"{d['signal']:+.3f}, p {d['p_value']:.2g}, {'flagged' if d['flagged'] else 'not flagged'}"
                    if d
                    else "-"
                )
            lines.append("| " + " | ".join(cells) + " |")
    if outcome.image_only:
        lines += ["", "Image-only rate of the test set against each model's training data (lmms-contam scan):", ""]
        lines += [
            f"- {data}: {r['image_only_rate']:.3f} of {r['images']} test images have a copy among "
            f"{r['corpus_rows']} training images (cosine > {r['threshold']})"
            for data, r in outcome.image_only.items()
        ]
    lines.append("")
    for c in outcome.checks:
        lines.append(f"- [{'x' if c.passed else ' '}] {c.claim}: {c.detail}")
    return "\n".join(lines)
