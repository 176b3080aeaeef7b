"""`lmms-contam import mm-perturb`: the paper authors' TSV + image folder into the plugin's schema."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from helpers.authors_release import AUTHORS_ROOT
from helpers.fixtures import RELEASE, real_photos
from helpers.harness import metric, run_lmms_eval

from lmms_contam.benchmarks.mm_perturb import local_image, read_tsv, row_options


def lmms_contam(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmms_contam.cli", *args], capture_output=True, text=True, timeout=300)


def test_import_counts_every_quirk_and_the_tasks_load_the_result(release, tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_HOME", str(tmp_path / "home"))  # its default folder, not the session's
    done = lmms_contam("import", "mm-perturb", "--tsv", str(release["tsv"]), "--images", str(release["images"]),
                       "--originals", str(release["originals"]))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mmstar: 7 of 12 rows imported" in done.stdout
    reasons = (
        "points at the unedited original image",
        "answer is not an option letter",
        "options differ from the original benchmark's",
        "image file missing",
        "answer unchanged",
    )
    for reason in reasons:
        assert f"skipped 1: {reason}" in done.stdout
    checked = lmms_contam("datasets", "mmstar", "--check")
    assert checked.returncode == 0 and "7 valid rows" in checked.stdout, checked.stderr
    (manifest,) = Path(checked.stdout.split(" ")[2]).glob("*.manifest.json")
    assert json.loads(manifest.read_text())["skipped"]["answer unchanged"] == 1
    # The imported set runs through the plugin's tasks with the harness's loader.
    run = run_lmms_eval(["--model", "contam_test_memoriser", "--tasks", "mmstar_contam"], tmp_path / "out")
    assert metric(run, "mmstar_contam", "n_pairs") == 7
    assert metric(run, "mmstar_contam", "delta") == -1.0


def test_keep_list_restricts_the_import(release, tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("# the human-kept subset\n6\n7\n\n8\n")
    out = tmp_path / "kept"
    done = lmms_contam("import", "mm-perturb", "--tsv", str(release["tsv"]), "--images", str(release["images"]),
                       "--originals", str(release["originals"]), "--keep", str(keep), "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mmstar: 3 of 12 rows imported" in done.stdout
    imported = datasets.load_dataset("parquet", data_files=str(out / "data.parquet"), split="train")
    assert sorted(imported["original_id"]) == ["6", "7", "8"]
    pairs = zip(imported["question"], imported["original_id"], strict=True)
    assert all(question.endswith(f"D: object {i}-3") for question, i in pairs)


def test_bad_release_inputs_fail_clearly(release, tmp_path):
    broken = tmp_path / "MMStar_pert_local.tsv"
    broken.write_text("index\tquestion\n0\tx\n")
    done = lmms_contam("import", "mm-perturb", "--tsv", str(broken), "--images", str(release["images"]),
                       "--originals", str(release["originals"]))  # fmt: skip
    assert done.returncode == 2 and "missing column(s) answer, A, B, image_path" in done.stderr
    done = lmms_contam("import", "mm-perturb", "--tsv", str(release["tsv"]), "--images", str(tmp_path / "none"),
                       "--originals", str(release["originals"]))  # fmt: skip
    assert done.returncode == 2 and "image folder not found" in done.stderr


@pytest.mark.parametrize(
    ("name", "rows", "empty_d", "not_letter", "unedited"),
    [("MMStar_pert_local.tsv", 1500, 175, 8, 48), ("RealWorldQA_pert_local.tsv", 765, 746, 0, 1)],
)
def test_the_real_release_tsvs_parse_with_their_quirks(name, rows, empty_d, not_letter, unedited, tmp_path):
    assert RELEASE.is_dir(), f"the release TSVs are expected in shared/ beside the checkout: {RELEASE}"
    table = read_tsv(RELEASE / name)
    assert len(table) == rows
    options = [row_options(row) for _, row in table.iterrows()]
    assert sum(len(o) < 4 for o in options) == empty_d
    letters = [chr(65 + i) for i in range(4)]
    assert sum(a not in letters for a in table["answer"]) == not_letter
    assert sum(Path(p).parent.name in ("MMStar", "RealWorldQA") for p in table["image_path"]) == unedited
    if name.startswith("MMStar"):
        assert any("\n" in q for q in table["question"])  # quoted multi-line questions survive
    folder, file = Path(table["image_path"][0]).parts[-2:]
    flat, nested, elsewhere = tmp_path / "flat", tmp_path / "nested", tmp_path / "second-archive"
    for root in (flat, nested / folder, elsewhere / folder):
        root.mkdir(parents=True)
    (flat / file).write_bytes(b"")
    assert local_image(table["image_path"][0], [flat]) == flat / file  # a flat folder
    (nested / folder / file).write_bytes(b"")
    assert local_image(table["image_path"][0], [nested]) == nested / folder / file
    assert not local_image(table["image_path"][0], [elsewhere]).exists()
    (elsewhere / folder / file).write_bytes(b"")  # one archive of several holds it
    assert local_image(table["image_path"][0], [tmp_path / "empty", elsewhere]) == elsewhere / folder / file


def test_realworldqa_open_ended_items_become_multiple_choice_like_the_release(tmp_path):
    """The authors turned open-ended RealWorldQA items into options; the original answer maps to a letter."""
    from helpers.fixtures import realworldqa_rows

    mc = realworldqa_rows(real_photos(), n=2)
    photo = mc[0]["original_image"]
    originals = [{"question": r["question"], "answer": r["original_answer"], "image": r["original_image"]} for r in mc]
    originals.append({"question": "How many cars are ahead? Please answer directly with a single word or number.",
                      "answer": "2", "image": photo})  # fmt: skip
    datasets.Dataset.from_list(originals).cast_column("image", datasets.Image()).to_parquet(
        str(tmp_path / "rw.parquet")
    )
    (tmp_path / "images" / "RealWorldQA_semantic_flux_v2").mkdir(parents=True)
    table = [
        {"answer": mc[0]["new_answer"], "index": "0", "A": "left", "B": "right", "C": "straight ahead", "D": "",
         "question": "Where does the road lead?"},
        {"answer": "B", "index": "1", "A": "right", "B": "left", "C": "straight ahead", "D": "",
         "question": "Where does the road lead?"},  # options reordered against the original
        {"answer": "C", "index": "2", "A": "1", "B": "2", "C": "3", "D": "", "question": "How many cars are ahead?"},
    ]  # fmt: skip
    for row in table:
        row["image_path"] = f"{AUTHORS_ROOT}/RealWorldQA_semantic_flux_v2/{row['index']}.jpg"
        (tmp_path / "images" / "RealWorldQA_semantic_flux_v2" / f"{row['index']}.jpg").write_bytes(photo["bytes"])
    with open(tmp_path / "RealWorldQA_pert_local.tsv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(table)
    out = tmp_path / "out"
    done = lmms_contam("import", "mm-perturb", "--tsv", str(tmp_path / "RealWorldQA_pert_local.tsv"),
                       "--images", str(tmp_path / "images"), "--originals", str(tmp_path / "rw.parquet"),
                       "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "realworldqa: 2 of 3 rows imported" in done.stdout
    assert "skipped 1: options differ from the original benchmark's" in done.stdout
    imported = {r["original_id"]: r for r in datasets.load_dataset("parquet", data_files=str(out / "data.parquet"),
                                                                   split="train")}  # fmt: skip
    assert imported["0"]["question"] == mc[0]["question"]  # the original prompt, options and all
    assert (imported["2"]["original_answer"], imported["2"]["new_answer"]) == ("B", "C")
    assert imported["2"]["question"] == (
        "How many cars are ahead?\nA. 1\nB. 2\nC. 3\n"
        "Please answer directly with only the letter of the correct option and nothing else."
    )
