"""A release in the paper authors' format (TSV + image folder) with their quirks, beside an original copy."""

from __future__ import annotations

import csv
from pathlib import Path

import datasets

from helpers.fixtures import mmstar_rows, real_photos

AUTHORS_ROOT = "/u/j/a/jadenpark/LMUData/images"


def write_authors_release(root: Path) -> dict[str, Path]:
    """An original MMStar copy (hub schema) and a release in the authors' format, with their quirks."""
    rows = mmstar_rows(real_photos())
    originals = [
        {"index": int(r["original_id"]), "question": r["question"], "answer": r["original_answer"],
         "category": r["category"], "l2_category": r["l2_category"], "image": r["original_image"]}
        for r in rows
    ]  # fmt: skip
    datasets.Dataset.from_list(originals).cast_column("image", datasets.Image()).to_parquet(
        str(root / "mmstar.parquet")
    )
    (root / "images" / "MMStar_semantic_flux").mkdir(parents=True)
    table = []
    for i, r in enumerate(rows):
        folder = "MMStar" if i == 0 else "MMStar_semantic_flux"  # row 0: the unedited original
        answer = {1: "Other Answers", 4: r["original_answer"]}.get(i, r["new_answer"])
        options = list(r["options"]) if i != 2 else [*r["options"][:3], ""]  # row 2: D dropped
        question = "Which object is shown\nin the image?" if i == 5 else "Which object is shown in the image?"
        table.append({"index": str(i), "question": question, "answer": answer, "category": r["category"],
                      "l2_category": r["l2_category"], "bench": "SEEDBench_IMG",
                      **dict(zip("ABCD", options, strict=True)),
                      "image_path": f"{AUTHORS_ROOT}/{folder}/{i}.jpg"})  # fmt: skip
        if i != 3:  # row 3: image missing from the archive
            (root / "images" / "MMStar_semantic_flux" / f"{i}.jpg").write_bytes(r["image"]["bytes"])
    with open(root / "MMStar_pert_local.tsv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(table)
    return {"root": root, "tsv": root / "MMStar_pert_local.tsv", "images": root / "images",
            "originals": root / "mmstar.parquet"}  # fmt: skip
