"""The benchmark loaders on local copies in each benchmark's hub layout."""

from __future__ import annotations

from collections import Counter

import datasets
import pytest
from helpers.benchmark_copies import N_ITEMS
from helpers.benchmark_fixtures import write_benchmark_copies

from lmms_contam.benchmarks import loaders
from lmms_contam.items import Item, Skipped
from lmms_contam.registry.specs import scannable


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    return write_benchmark_copies(tmp_path_factory.mktemp("copies"))


@pytest.mark.parametrize("benchmark", scannable())
def test_every_row_is_an_item_or_a_counted_skip(copies, benchmark):
    rows = loaders.load_rows(benchmark, str(copies[benchmark]))
    parsed = list(loaders.items(benchmark, rows))
    assert len(parsed) == len(rows)
    found = [p for p in parsed if isinstance(p, Item)]
    assert len(found) == N_ITEMS
    assert all(item.image.size[0] > 0 and len(item.options) >= 2 for item in found)
    assert all(item.answer in ("A", "B", "C", "D", "Yes", "No") for item in found)
    # The ids the scan embeds, read without decoding an image, are those of the items.
    assert loaders.scanned_ids(benchmark, rows) == [item.original_id for item in found]
    assert len(set(loaders.original_ids(benchmark, rows))) == len(rows), "ids must be unique"
    skipped = Counter(p.reason for p in parsed if isinstance(p, Skipped))
    expected = {"seedbench": {"video item with 3 frames, not one image": 2},
                "mmbench": {f"circular copy of item {i} (same image)": 1 for i in range(4)},
                "mmmu": {"open question, no options to swap to": 1, "shows 2 images, not one": 1}}  # fmt: skip
    assert skipped == expected.get(benchmark, {})


def test_benchmark_specific_fields(copies):
    mmbench = list(loaders.items("mmbench", loaders.load_rows("mmbench", str(copies["mmbench"]))))
    assert mmbench[0].question == "Hint 0. What is in photo 0?" and mmbench[1].question == "What is in photo 1?"
    assert mmbench[0].options == ("a0", "b0", "c0", "d0")
    mme = list(loaders.items("mme", loaders.load_rows("mme", str(copies["mme"]))))
    assert [i.original_id for i in mme[:2]] == ["existence/0000.png#0", "existence/0000.png#1"]
    assert [i.answer for i in mme[:2]] == ["Yes", "No"]
    seed = next(iter(loaders.items("seedbench", loaders.load_rows("seedbench", str(copies["seedbench"])))))
    assert seed.options == ("a0", "b0", "c0", "d0") and seed.original_id == "q0"
    sqa = list(loaders.items("scienceqa", loaders.load_rows("scienceqa", str(copies["scienceqa"]))))
    assert sqa[0].options == ("a0", "b0", "c0", "d0") and sqa[0].answer == "D"  # index 3 in the hub's row
    assert sqa[0].question == "Which object is in photo 0?" and sqa[0].original_id == "0"  # numbered by position
    assert sqa[0].extra == {"hint": "Photo 0 was taken outdoors."} and sqa[1].extra == {"hint": ""}
    mmmu = next(iter(loaders.items("mmmu", loaders.load_rows("mmmu", str(copies["mmmu"])))))
    assert (mmmu.options, mmmu.original_id) == (("a0", "b0", "c0", "d0"), "validation_Art_0")
    ai2d = next(iter(loaders.items("ai2d", loaders.load_rows("ai2d", str(copies["ai2d"])))))
    assert (ai2d.options, ai2d.answer, ai2d.original_id) == (("a0", "b0", "c0", "d0"), "D", "0")  # answer "3"


def test_mmbench_leaves_out_missing_options():
    row = {"index": 7, "question": "Which?", "hint": None, "A": "yes", "B": "no", "C": "nan", "D": None,
           "answer": "B", "category": "c", "L2-category": "l", "image": None}  # fmt: skip
    rows = datasets.Dataset.from_list([row])
    (item,) = loaders.items("mmbench", rows)
    assert item.options == ("yes", "no") and item.question == "Which?"
