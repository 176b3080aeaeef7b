"""A tenth benchmark is one file per layer and its fixture rows: the toy (tests/helpers/toy_benchmark/), registered
in the test only, goes through the registry, the perturbed-set schema, lmms-eval's documents and scoring and the
VLMEvalKit export with no other change."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import datasets
import pytest
from helpers.fixtures import point_at_sets, real_photos
from helpers.toy_benchmark import lmms_eval_binding, rows, vlmevalkit_binding
from helpers.toy_benchmark import spec as toy
from PIL import Image

import lmms_contam
from lmms_contam.benchmarks.loaders import items, load_rows
from lmms_contam.cli import main
from lmms_contam.hosts.lmms_eval import bindings as lmms_eval_bindings
from lmms_contam.hosts.lmms_eval import documents, scoring, task_files
from lmms_contam.hosts.vlmevalkit import bindings as vlmevalkit_bindings
from lmms_contam.hosts.vlmevalkit.export import export_manifest, vlmevalkit_reads
from lmms_contam.items import Item
from lmms_contam.letters import option_letters
from lmms_contam.registry import specs
from lmms_contam.schema import SCHEMA_VERSION, PerturbedSetError, validate, write_parquet
from lmms_contam.set_locations import env_var, load_perturbed_set, resolve

TOY = toy.NAME
TOY_FOLDER = Path(toy.__file__).parent


@pytest.fixture
def toy_registered():
    """The toy in all three layers, as another package would add it; gone again after the test."""
    try:
        specs.add_benchmark(toy.SPEC)
        lmms_eval_bindings.add_binding(TOY, lmms_eval_binding.BINDING)
        vlmevalkit_bindings.add_binding(TOY, vlmevalkit_binding.BINDING)
        yield
    finally:
        for table in (specs.SPECS, lmms_eval_bindings.BINDINGS, vlmevalkit_bindings.BINDINGS):
            table.pop(TOY, None)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _set_row(item: Item, edited: bytes) -> dict:
    """An item and its counterfactual (another photo, the next option the gold) as a row of a perturbed set."""
    letters = option_letters(len(item.options))
    return {
        "item_id": f"{TOY}-{item.original_id}",
        "original_id": item.original_id,
        "benchmark": TOY,
        "question": item.question,
        "options": list(item.options),
        "original_answer": item.answer,
        "new_answer": letters[(letters.index(item.answer) + 1) % len(letters)],
        "original_image": {"bytes": _png(item.image)},
        "image": {"bytes": edited},
        **item.extra,
        "provenance": json.dumps({"source": "lmms-contam toy benchmark test"}),
        "schema_version": SCHEMA_VERSION,
    }


@pytest.fixture
def parsed(toy_registered, tmp_path) -> list[Item]:
    """The fixture rows written as a local copy of the toy's hub dataset, read back as Items by its spec."""
    copy = tmp_path / "toyquiz-hub.parquet"
    datasets.Dataset.from_list(rows.hub_rows()).cast_column("picture", datasets.Image()).to_parquet(str(copy))
    return list(items(TOY, load_rows(TOY, str(copy))))


@pytest.fixture
def toy_set(parsed, tmp_path, monkeypatch) -> tuple[Path, list[dict]]:
    """A perturbed set of the toy, written through the schema, that the tasks and the export resolve."""
    photos = real_photos(size=32)
    set_rows = [_set_row(item, photos[(i + 8) % len(photos)]) for i, item in enumerate(parsed)]
    path = write_parquet(set_rows, TOY, tmp_path / "toyquiz.parquet")
    point_at_sets(monkeypatch, {TOY: path})
    return path, set_rows


def test_the_toy_needs_one_file_per_layer_and_its_fixture_rows_and_nothing_in_the_package():
    files = sorted(path.name for path in TOY_FOLDER.iterdir() if path.is_file())
    assert files == ["lmms_eval_binding.py", "rows.py", "spec.py", "vlmevalkit_binding.py"]
    package = Path(lmms_contam.__file__).parent
    naming = [p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".jsonl") and TOY in p.read_text()]
    assert not naming


def test_each_layer_lists_its_benchmarks_in_the_registry_s_order():
    assert list(lmms_eval_bindings.BINDINGS) == list(specs.SPECS)
    exported, refused = vlmevalkit_bindings.BINDINGS, vlmevalkit_bindings.REFUSED
    assert [*exported] == [name for name in specs.SPECS if name not in refused]
    assert set(refused) == {"mme", "naturalbench"}


def test_a_hub_row_is_an_item_by_its_spec_and_the_registry_lists_the_toy(parsed):
    assert [item.original_id for item in parsed] == ["toy-0", "toy-1", "toy-2", "toy-3"]
    first = parsed[0]
    assert (first.benchmark, first.question, first.answer) == (TOY, "What is in photo 0?", "A")
    assert first.extra == {"topic": "animals"}
    assert first.options == ("thing 0-0", "thing 0-1", "thing 0-2") and max(first.image.size) == 32
    for listed in (specs.scannable, specs.perturbable, specs.perturb_from_hub, specs.with_detectors):
        assert TOY in listed()
    assert TOY not in specs.released() and TOY in vlmevalkit_bindings.exportable()
    with pytest.raises(ValueError, match="already listed"):
        specs.add_benchmark(replace(toy.SPEC, label="Another"))
    with pytest.raises(ValueError, match="already has an lmms-eval binding"):
        lmms_eval_bindings.add_binding(TOY, lmms_eval_bindings.BINDINGS["mmstar"])
    with pytest.raises(ValueError, match="already has a VLMEvalKit binding or refusal"):
        vlmevalkit_bindings.add_binding(TOY, vlmevalkit_bindings.BINDINGS["mmstar"])
    with pytest.raises(ValueError, match="already has a VLMEvalKit binding or refusal"):
        vlmevalkit_bindings.add_binding("mme", vlmevalkit_bindings.BINDINGS["mmstar"])  # refused, not bound
    specs.add_benchmark(toy.SPEC)  # the same entry again is one
    assert specs.SPECS[TOY] is toy.SPEC


def test_a_perturbed_set_of_the_toy_is_validated_and_resolved_like_any(toy_set, tmp_path):
    path, set_rows = toy_set
    location = resolve(TOY)
    assert location.value == str(path) and env_var(TOY) in location.found_via
    loaded = load_perturbed_set(TOY)
    assert [(row["item_id"], row["topic"]) for row in loaded] == [(row["item_id"], row["topic"]) for row in set_rows]
    unchanged = [{**set_rows[0], "new_answer": set_rows[0]["original_answer"]}]
    with pytest.raises(PerturbedSetError, match="new_answer equals original_answer"):
        write_parquet(unchanged, TOY, tmp_path / "unchanged.parquet")
    with pytest.raises(PerturbedSetError, match="missing column.s. topic"):
        validate(loaded.remove_columns("topic"), TOY, "a set without the toy's column")


def _other_letter(doc: dict) -> str:
    return next(letter for letter in option_letters(doc["contam_n_options"]) if letter != doc["answer"])


def test_its_lmms_eval_documents_are_its_own_shape_scored_by_the_built_in(toy_set):
    _, set_rows = toy_set
    docs = documents.task_docs(TOY, "contam")(None)
    assert len(docs) == 2 * len(set_rows)
    first = docs[0]
    assert first["question"] == "What is in photo 0?\nOptions: A: thing 0-0, B: thing 0-1, C: thing 0-2"
    assert (first["index"], first["category"], first["l2_category"]) == ("toy-0", "animals", "animals")
    assert (first["contam_benchmark"], first["contam_variant"], first["answer"]) == (TOY, "original", "A")
    assert first["image"].size == Image.open(io.BytesIO(set_rows[0]["original_image"]["bytes"])).size
    process = scoring.task_results(TOY, "contam")
    right = [process(doc, [f"The answer is ({doc['answer']})."])["contam_ids"] for doc in docs]
    wrong = [process(doc, [_other_letter(doc)])["contam_ids"] for doc in docs]
    assert [r["correct"] for r in right] == [1] * len(docs) and [r["correct"] for r in wrong] == [0] * len(docs)
    assert scoring.AGGREGATIONS["acc_perturbed"](right) == 1.0 and scoring.AGGREGATIONS["n_pairs"](wrong) == 4
    single = scoring.task_results(TOY, "perturbed")(docs[1], [docs[1]["answer"]])
    assert single["average"]["score"] == 1.0 and single["contam_ids"]["variant"] == "perturbed"  # MMStar's own
    circular = documents.task_docs(TOY, "circular")(None)
    assert len(circular) == 3 * len(set_rows)  # every rotation of each item's three options


def test_its_lmms_eval_task_files_are_generated(toy_registered):
    files, functions = task_files.generated()
    assert {f"{TOY}/{TOY}_{family}.yaml" for family in ("contam", "circular")} <= files.keys()
    assert f'{TOY}_contam_docs = documents.task_docs("{TOY}", "contam")' in functions


def test_its_vlmevalkit_export_is_written_and_read_back(toy_set, tmp_path):
    _, set_rows = toy_set
    lmudata = tmp_path / "LMUData"
    assert main(["export", "vlmevalkit", TOY, "--lmudata", str(lmudata)]) == 0
    tsv = lmudata / "ToyQuiz_contam.tsv"
    table = vlmevalkit_reads(tsv)
    assert len(table) == 2 * len(set_rows) and table["index"].is_unique
    by_item = {row["item_id"]: row for row in set_rows}
    for line in table.to_dict("records"):
        row = by_item[line["contam_item_id"]]
        gold = row["original_answer"] if line["split"] == "original" else row["new_answer"]
        assert (line["question"], line["answer"], line["category"]) == (row["question"], gold, row["topic"])
        assert [line[letter] for letter in "ABC"] == row["options"]
    manifest = json.loads(export_manifest(tsv).read_text())
    assert (manifest["dataset"], manifest["items"], manifest["rows"]) == ("ToyQuiz_contam", 4, 8)
