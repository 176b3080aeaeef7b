"""Bad perturbed sets fail with a message that names the file, the row and the field."""

import datasets
import pytest
from helpers.fixtures import mme_rows, mmstar_rows, naturalbench_rows, real_photos
from PIL import ImageFile

from lmms_contam.schema import PerturbedSetError, features_for, validate, write_parquet


@pytest.fixture(scope="module")
def rows():
    return mmstar_rows(real_photos())


def _dataset(rows, benchmark="mmstar", drop=None):
    features = features_for(benchmark)
    if drop:
        features = datasets.Features({k: v for k, v in features.items() if k != drop})
        rows = [{k: v for k, v in row.items() if k != drop} for row in rows]
    return datasets.Dataset.from_list(rows, features=features)


def test_valid_fixture_passes(rows):
    validate(_dataset(rows), "mmstar", "fixture.parquet")


def test_missing_column_is_named(rows):
    with pytest.raises(PerturbedSetError, match=r"fixture\.parquet: missing column\(s\) l2_category"):
        validate(_dataset(rows, drop="l2_category"), "mmstar", "fixture.parquet")


def test_answer_not_among_options_names_the_row(rows):
    bad = [dict(row) for row in rows]
    bad[3]["new_answer"] = "E"
    with pytest.raises(
        PerturbedSetError, match=r"row 3 \(item_id 'mmstar-3'\): new_answer 'E' is not among the options"
    ):
        validate(_dataset(bad), "mmstar", "fixture.parquet")


def test_duplicate_ids_name_both_rows(rows):
    bad = [dict(row) for row in rows]
    bad[5]["item_id"] = bad[2]["item_id"]
    with pytest.raises(PerturbedSetError, match=r"row 5 .*duplicate item_id 'mmstar-2', first seen in row 2"):
        validate(_dataset(bad), "mmstar", "fixture.parquet")


def test_unchanged_answer_is_refused(rows):
    bad = [dict(row) for row in rows]
    bad[0]["new_answer"] = bad[0]["original_answer"]
    with pytest.raises(PerturbedSetError, match=r"row 0 .*new_answer equals original_answer"):
        validate(_dataset(bad), "mmstar", "fixture.parquet")


@pytest.mark.parametrize("lenient_pil", [False, True], ids=["strict", "lmms-eval-sets-LOAD_TRUNCATED_IMAGES"])
def test_unreadable_image_names_row_and_column(rows, lenient_pil, monkeypatch):
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", lenient_pil)
    bad = [dict(row) for row in rows]
    bad[7]["image"] = {"bytes": bad[7]["image"]["bytes"][:200]}  # a truncated PNG
    with pytest.raises(PerturbedSetError, match=r"row 7 \(item_id 'mmstar-7'\), column 'image': unreadable image"):
        validate(_dataset(bad), "mmstar", "fixture.parquet")


def test_other_schema_version_is_refused(rows):
    bad = [dict(row) for row in rows]
    bad[1]["schema_version"] = 2
    with pytest.raises(PerturbedSetError, match=r"row 1 .*schema_version 2, this lmms-contam reads 1"):
        validate(_dataset(bad), "mmstar", "fixture.parquet")


@pytest.mark.parametrize("benchmark,rows,slot", [("naturalbench", naturalbench_rows, "q2_i0"),
                                                ("mme", mme_rows, "q2")])  # fmt: skip
def test_group_scored_answers_are_option_texts_and_slots_are_checked(benchmark, rows, slot):
    rows = rows(real_photos())
    validate(_dataset(rows, benchmark), benchmark, "set.parquet")
    bad = [dict(row) for row in rows]
    bad[4]["group_slot"] = slot  # a third question about one MME image; a slot outside NaturalBench's 2x2
    with pytest.raises(PerturbedSetError, match=rf"row 4 .*group_slot '{slot}'"):
        validate(_dataset(bad, benchmark), benchmark, "set.parquet")


def test_write_parquet_leaves_nothing_behind_on_bad_rows(rows, tmp_path):
    bad = [dict(row) for row in rows]
    bad[0]["original_answer"] = "Z"
    with pytest.raises(PerturbedSetError):
        write_parquet(bad, "mmstar", tmp_path / "set.parquet")
    assert list(tmp_path.iterdir()) == []
    written = write_parquet(rows, "mmstar", tmp_path / "set.parquet")
    assert [p.name for p in tmp_path.iterdir()] == ["set.parquet"]
    assert datasets.load_dataset("parquet", data_files=str(written), split="train")[0]["image"].size[0] > 0
