"""`verify --calibrate N`: how often the user's judge keeps a flawed counterfactual or rejects a good one,
measured on procedural counterfactuals whose truth is known, before it verifies a set.

Half the items are the synthetic benchmark's ideal edits of clear scenes (a good counterfactual: keep),
half are its four kinds of failed edit in turn (unchanged, a third option's colour, halfway, the target
removed: reject). They are drawn from scenes of their own, rendered at the set's image size, and asked
with the set's own judge prompt and settings through the same call as `verify` (stored, so a rerun asks
nothing twice). Simple shapes are easier to read than photos: the rates are a lower bound on the judge's
errors, not its errors on the benchmark. The judge-quality study (`experiment --judge-errors`) measured
the keep rate above which a clean model gets accused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from PIL import Image
from scipy import stats as scipy_stats

from lmms_contam.items import Item
from lmms_contam.letters import option_letters
from lmms_contam.llm import ChatClient, TooManyFailures, failure_problems
from lmms_contam.perturb.config import PerturbConfig
from lmms_contam.perturb.verify import judge_counterfactual
from lmms_contam.store import StageStore
from lmms_contam.synthetic import benchmark, flaws
from lmms_contam.synthetic.scenes import Scene, counterfactual, render

PREFIX = "calibration"
# The judge-quality study's largest safe rate of keeping flawed counterfactuals, as this calibration measures
# it (`experiment --judge-errors`, measured 2026-12-05, README "How good must the verifying judge be?"): a judge
# keeping 5% of flawed counterfactuals beyond the ideal reader accused no clean model or control at flaw rates
# 0.2 and 0.4 (3 seeds, any reject_good rate); 10% did on 1 seed of 3. Calibration measures that judge at
# 0.12-0.16 (mean 0.143; the ideal reader itself at 0.10, the halfway colours that read as the new answer).
SAFE_KEEP_FLAWED: float | None = 0.14


MAX_ITEMS = 10_000  # each item is a judge call; a calibration's interval is already +-1% at this size


@dataclass(frozen=True)
class CalibrationItem:
    """One item to ask about; its images are drawn when it is asked, so memory does not grow with N."""

    key: str
    scene: Scene
    new: int  # index of the new answer among the options
    flaw: str | None  # None: the ideal counterfactual
    size: tuple[int, int] | None  # the set's image size (None: the scene's own)

    @property
    def new_letter(self) -> str:
        return option_letters(4)[self.new]

    def item(self) -> Item:
        return benchmark.to_item(self.key.removeprefix(f"{PREFIX}:"), self.scene)

    def image(self) -> Image.Image:
        item_id = self.key.removeprefix(f"{PREFIX}:")
        flawed = self.flaw and flaws.flawed_image(self.scene, self.new, self.flaw, item_id)
        image = flawed or render(counterfactual(self.scene, self.new))
        if self.size and image.size != tuple(self.size):
            image = image.resize(tuple(self.size), Image.Resampling.NEAREST)  # the colours stay exact
        return image


def check_count(count: int) -> None:
    if not 2 <= count <= MAX_ITEMS:
        raise ValueError(f"--calibrate takes 2 to {MAX_ITEMS:,} items (one good, one flawed at least), got {count:,}")


def calibration_items(count: int, size: tuple[int, int] | None = None) -> list[CalibrationItem]:
    """`count` items, good and flawed in turn (the flaws' four kinds in turn), from clear scenes only: an
    ambiguous scene's good counterfactual reads as another option, which no judge can tell from a flaw."""
    check_count(count)
    kinds = list(flaws.FLAW_SHARES)
    items: list[CalibrationItem] = []
    start = 0
    while len(items) < count:
        for item_id, scene in benchmark.scenes(PREFIX, count, 0, start):
            if scene.confusion or len(items) == count:
                continue
            new = benchmark.swapped_answer(benchmark.to_item(item_id, scene), 0)
            flaw = None if len(items) % 2 == 0 else kinds[(len(items) // 2) % len(kinds)]
            items.append(CalibrationItem(key=f"{PREFIX}:{item_id}", scene=scene, new=new, flaw=flaw, size=size))
        start += count
    return items


@dataclass(frozen=True)
class Calibration:
    judge: str
    items: int
    image_size: tuple[int, int]
    flawed: int
    flawed_kept: int
    good: int
    good_rejected: int
    failed: int  # calls that gave no usable verdict: counted in neither rate
    keep_flawed: float
    keep_flawed_ci: tuple[float, float]  # exact (Clopper-Pearson) 95% interval
    reject_good: float
    reject_good_ci: tuple[float, float]
    kept_by_kind: dict[str, str]  # flaw kind -> "kept/asked"
    safe_keep_flawed: float | None  # the study's safe rate when this was measured

    @property
    def above_safe(self) -> bool | None:
        return None if self.safe_keep_flawed is None else self.keep_flawed > self.safe_keep_flawed

    def as_record(self) -> dict:
        note = "measured on procedural shapes: a lower bound on the judge's errors on the benchmark"
        return {**asdict(self), "above_safe": self.above_safe, "note": note}


def _rate(k: int, n: int) -> tuple[float, tuple[float, float]]:
    interval = scipy_stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return k / n, (round(float(interval.low), 4), round(float(interval.high), 4))


def calibrate(
    config: PerturbConfig, work: Path, count: int, size: tuple[int, int] | None, max_failure_rate: float = 0.5
) -> Calibration:
    """Ask the configured judge about `count` calibration items; raises TooManyFailures as `verify` does, and
    when no good or no flawed item got a usable verdict (a rate of nothing is no calibration)."""
    if config.judge is None:
        raise ValueError("the recipe has no verify.judge section: calibration needs a judge model")
    items = calibration_items(count, size)
    client = ChatClient(config.judge_endpoint, stage="calibration")
    store = StageStore(work)

    def ask(entry: CalibrationItem) -> dict:
        image = entry.image()
        return judge_counterfactual(client, store, entry.key, entry.item(), image, entry.new_letter, config.judge)

    verdicts = client.map(ask, items, desc="calibrating the judge")
    problems = failure_problems([client.outcomes], max_failure_rate)
    if problems:
        raise TooManyFailures("; ".join(problems))
    answered = [(e, v) for e, v in zip(items, verdicts, strict=True) if not isinstance(v, BaseException)]
    flawed = [(e, v) for e, v in answered if e.flaw]
    good = [(e, v) for e, v in answered if not e.flaw]
    unmeasured = [side for side, judged in (("flawed", flawed), ("good", good)) if not judged]
    if unmeasured:
        raise TooManyFailures(
            f"calibration measured nothing: the judge gave no usable verdict on any {' or '.join(unmeasured)} "
            f"item ({len(items) - len(answered)} of {len(items)} calls failed)"
        )
    flawed_kept = sum(v["outcome"] == "keep" for _, v in flawed)
    good_rejected = sum(v["outcome"] != "keep" for _, v in good)
    keep_flawed, keep_ci = _rate(flawed_kept, len(flawed))
    reject_good, reject_ci = _rate(good_rejected, len(good))
    by_kind = {
        kind: f"{sum(v['outcome'] == 'keep' for e, v in flawed if e.flaw == kind)}/"
        f"{sum(e.flaw == kind for e, _ in flawed)}"
        for kind in flaws.FLAW_SHARES
    }
    return Calibration(
        judge=config.judge_endpoint.model,
        items=len(items),
        image_size=tuple(size) if size else items[0].image().size,
        flawed=len(flawed),
        flawed_kept=flawed_kept,
        good=len(good),
        good_rejected=good_rejected,
        failed=len(items) - len(answered),
        keep_flawed=keep_flawed,
        keep_flawed_ci=keep_ci,
        reject_good=reject_good,
        reject_good_ci=reject_ci,
        kept_by_kind=by_kind,
        safe_keep_flawed=SAFE_KEEP_FLAWED,
    )


def summary(calibration: Calibration) -> str:
    """What `verify --calibrate` prints."""
    c = calibration
    lines = [
        f"judge calibration ({c.items} procedural counterfactuals at {c.image_size[0]}x{c.image_size[1]}, "
        f"{c.failed} unanswered):",
        f"  keeps flawed: {c.flawed_kept}/{c.flawed} = {c.keep_flawed:.1%} (95% CI {c.keep_flawed_ci[0]:.1%}-"
        f"{c.keep_flawed_ci[1]:.1%}; by kind {', '.join(f'{k} {v}' for k, v in c.kept_by_kind.items())})",
        f"  rejects good: {c.good_rejected}/{c.good} = {c.reject_good:.1%} (95% CI {c.reject_good_ci[0]:.1%}-"
        f"{c.reject_good_ci[1]:.1%})",
    ]
    if c.above_safe:
        lines.append(
            f"  WARNING: above the {c.safe_keep_flawed:.0%} up to which the judge-quality study accused no "
            "clean model; a negative delta on this set may come from flawed items it kept"
        )
    lines.append("  (simple shapes: a lower bound on the judge's errors on the benchmark's images)")
    return "\n".join(lines)
