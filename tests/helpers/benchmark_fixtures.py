"""What the tests know of each benchmark, in one table keyed like SPECS: how to build its fixture items (a
perturbed set, a copy in its hub layout) and what its built-in lmms-eval task reports.

A benchmark added to SPECS without an entry here fails `tests/unit/test_benchmark_fixtures.py`, naming it,
and every test that asks for its fixture fails with the same message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import datasets

from helpers import benchmark_copies as copies
from helpers import fixtures
from lmms_contam.registry.specs import perturbable, scannable
from lmms_contam.schema import write_parquet
from lmms_contam.synthetic.benchmark import VARIED, build_test_set

Rows = Callable[[list[bytes]], list[dict]]
MMSTAR_CATEGORIES = (
    "coarse perception",
    "fine-grained perception",
    "instance reasoning",
    "logical reasoning",
    "science & technology",
    "math",
)


@dataclass(frozen=True, kw_only=True)
class BenchmarkFixture:
    set_rows: Rows | None = None  # its perturbed-set items (a perturbable spec)
    hub_rows: Rows | None = None  # a copy in its hub layout, 32 items over the corpus photos (a scannable spec)
    photo_shown: Callable[[dict], int | None] = copies.photo_in_question  # the photo a hub row shows (None: unscanned)
    hub_image_fields: tuple[str, ...] = ("image",)
    hub_image_list: bool = False  # the hub column holds a list of images (SEED-Bench's frames)
    builtin_split: str = "test"  # the split its built-in task reads
    # The metrics its built-in task reports, under this filter; none for NaturalBench, whose built-in
    # aggregations assert all 7,600 rows.
    builtin_metrics: tuple[str, ...] = ()
    builtin_filter: str = "none"


FIXTURES: dict[str, BenchmarkFixture] = {
    "mmstar": BenchmarkFixture(
        set_rows=fixtures.mmstar_rows,
        hub_rows=copies.mmstar_copy,
        builtin_split="val",
        builtin_metrics=(*MMSTAR_CATEGORIES, "average"),
    ),
    "realworldqa": BenchmarkFixture(
        set_rows=fixtures.realworldqa_rows, hub_rows=copies.realworldqa_copy, builtin_metrics=("exact_match",)
    ),
    "naturalbench": BenchmarkFixture(
        set_rows=fixtures.naturalbench_rows,
        hub_rows=copies.naturalbench_copy,
        photo_shown=copies.naturalbench_photo,
        hub_image_fields=("Image",),
    ),
    "seedbench": BenchmarkFixture(
        set_rows=fixtures.seedbench_rows,
        hub_rows=copies.seedbench_copy,
        photo_shown=copies.seedbench_photo,
        hub_image_list=True,
        builtin_metrics=("seed_image", "seed_all"),
    ),
    "mmbench": BenchmarkFixture(
        set_rows=fixtures.mmbench_rows,
        hub_rows=copies.mmbench_copy,
        photo_shown=copies.mmbench_photo,
        builtin_split="dev",
        builtin_metrics=("gpt_eval_score",),
    ),
    "mme": BenchmarkFixture(
        set_rows=fixtures.mme_rows,
        hub_rows=copies.mme_copy,
        photo_shown=copies.mme_photo,
        builtin_metrics=("mme_perception_score", "mme_cognition_score"),
    ),
    "scienceqa": BenchmarkFixture(
        set_rows=fixtures.scienceqa_rows, hub_rows=copies.scienceqa_copy, builtin_metrics=("exact_match",)
    ),
    "ai2d": BenchmarkFixture(
        set_rows=fixtures.ai2d_rows,
        hub_rows=copies.ai2d_copy,
        builtin_metrics=("exact_match",),
        builtin_filter="flexible-extract",
    ),
    "mmmu": BenchmarkFixture(
        set_rows=fixtures.mmmu_rows,
        hub_rows=copies.mmmu_copy,
        photo_shown=copies.mmmu_photo,
        hub_image_fields=("image_1", "image_2"),
        builtin_split="validation",
        builtin_metrics=("mmmu_acc",),
    ),
    # The controlled experiment's benchmark is procedural: its own builder writes its set (write_fixture_sets).
    "synthetic": BenchmarkFixture(),
    "synthetic_varied": BenchmarkFixture(),
}


def fixture_of(benchmark: str) -> BenchmarkFixture:
    if benchmark not in FIXTURES:
        raise LookupError(
            f"{benchmark}: no test fixture; add a BenchmarkFixture for it in tests/helpers/benchmark_fixtures.py"
        )
    return FIXTURES[benchmark]


def set_rows_of(benchmarks) -> dict[str, Rows]:
    """{benchmark: its set-row builder} for the benchmarks whose fixture items are built from rows."""
    return {name: fixture_of(name).set_rows for name in benchmarks if fixture_of(name).set_rows}


def hub_rows_of(benchmarks) -> dict[str, Rows]:
    return {name: fixture_of(name).hub_rows for name in benchmarks if fixture_of(name).hub_rows}


def write_fixture_sets(folder: Path) -> dict[str, Path]:
    """One parquet file per perturbable benchmark; returns {benchmark: path}."""
    photos = fixtures.real_photos()
    sets = {
        name: write_parquet(build(photos), name, folder / f"{name}.parquet")
        for name, build in set_rows_of(perturbable()).items()
    }
    # MMStar's has a manifest beside it, as every set lmms-contam writes does: its hash names the set in records
    (folder / "mmstar.manifest.json").write_text(json.dumps({"source": "tests/fixtures.py"}) + "\n")
    sets["synthetic"] = build_test_set(12, folder / "synthetic.parquet")
    sets["synthetic_varied"] = build_test_set(12, folder / "synthetic_varied.parquet", of=VARIED)
    return sets


def write_benchmark_copies(folder: Path) -> dict[str, Path]:
    """One parquet per scannable benchmark, in its hub layout; returns {benchmark: path}."""
    photos = fixtures.real_photos(size=128)
    paths = {}
    for benchmark, build in hub_rows_of(scannable()).items():
        fixture = fixture_of(benchmark)
        table = datasets.Dataset.from_list(build(photos))
        feature = [datasets.Image()] if fixture.hub_image_list else datasets.Image()
        for field in fixture.hub_image_fields:
            table = table.cast_column(field, feature)
        paths[benchmark] = folder / f"{benchmark}.parquet"
        table.to_parquet(str(paths[benchmark]))
    return paths


def expected_flags(benchmark: str) -> list[bool | None]:
    """Per hub row: True if its photo is in the corpus, False if not, None if unscanned."""
    fixture = fixture_of(benchmark)
    flags = []
    for row in fixture.hub_rows(fixtures.real_photos(size=16)):
        photo = fixture.photo_shown(row)
        flags.append(None if photo is None else photo in copies.CORPUS_PHOTOS)
    return flags
