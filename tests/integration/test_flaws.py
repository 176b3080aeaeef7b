"""The flaw model, the ideal reader and its judge endpoint, and verification of flawed synthetic sets
through `lmms-contam verify`'s own code (the lmms-eval part runs in test_synthetic's demo test)."""

from __future__ import annotations

import json
from dataclasses import replace
from io import BytesIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from lmms_contam.cli import main
from lmms_contam.lab import flaw_study, ideal_reader, judge_study
from lmms_contam.lab.chat_endpoint import ChatEndpoint, request_parts
from lmms_contam.lab.judge_server import (
    IdealReaderJudge,
    JudgeErrors,
    calibration_truths,
    pixel_digest,
    truths_of,
    verdict,
)
from lmms_contam.letters import option_letters
from lmms_contam.llm import image_part
from lmms_contam.perturb.config import PerturbConfig
from lmms_contam.perturb.verify_set import verify_set
from lmms_contam.report.set_status import set_status
from lmms_contam.schema import manifest_beside
from lmms_contam.set_locations import env_var
from lmms_contam.synthetic import benchmark, calibration, flaws
from lmms_contam.synthetic.scenes import KINDS, render


def test_the_judge_endpoint_answers_in_the_verification_format():
    scene = benchmark.test_scenes(1)[0][1]
    options = KINDS[scene.kind].options
    text = f"Question:\n{scene.question_text()}\n\nOptions:\n" + "\n".join(
        f"{letter}. {option}" for letter, option in zip(option_letters(4), options, strict=True)
    )
    body = {"messages": [{"role": "user", "content": [image_part(render(scene)), {"type": "text", "text": text}]}]}
    assert verdict(body)["correct_options"] == [option_letters(4)[scene.looks_like()]]
    no_image = {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    assert verdict(no_image)["correct_options"] == []


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """A 300-item set with 40% flaws, verified by `verify`'s code with the ideal reader as its judge."""
    folder = tmp_path_factory.mktemp("flaws") / "f0.40"
    data = flaw_study.flawed_set(folder, 300, 0.4)
    with IdealReaderJudge() as judge:
        recipe = replace(PerturbConfig.from_yaml(flaw_study.RECIPE), judge_endpoint=judge.endpoint)
        subset = verify_set(folder, recipe, 0.0)
    return data, subset


def test_a_flawed_set_records_its_flaws_and_says_it_is_not_verified(verified, monkeypatch):
    data, _ = verified
    record = json.loads(benchmark.flaws_path(data).read_text())
    ids = pq.read_table(data, columns=["item_id"])["item_id"].to_pylist()
    assert record["items"] == {i: flaws.flaw_of(i, 0.4) for i in ids if flaws.flaw_of(i, 0.4)}
    assert "flaw" not in pq.read_schema(data).names  # nothing the tasks read names the flawed items
    monkeypatch.setenv(env_var("synthetic"), str(data))
    assert set_status("synthetic").verified is False
    monkeypatch.setenv(env_var("synthetic"), str(data.parent))  # the folder: the tasks read its subset
    status = set_status("synthetic")
    assert status.verified is True and status.of == 300 and status.kept < 300


def test_verification_removes_what_misleads_a_reader_and_no_clear_good_item(verified):
    data, subset = verified
    screened = flaw_study.screening(0.4, data, subset)
    assert screened.items == 300 and sum(screened.flawed.values()) == len(json.loads(
        benchmark.flaws_path(data).read_text())["items"])  # fmt: skip
    assert screened.flawed_removed["unchanged"] == screened.flawed["unchanged"]  # the drift check
    assert screened.flawed_removed["removed"] == screened.flawed["removed"]
    assert screened.flawed_removed_share > 0.75
    # The good items it removes are exactly those ambiguous by design: their counterfactual reads as
    # another option, as their original does.
    assert screened.good_removed == screened.ambiguous_good > 0
    kept = pq.read_table(data.parent / "verified" / "data.parquet", columns=["item_id"])["item_id"].to_pylist()
    assert len(kept) == screened.kept == subset.kept
    # Every kept counterfactual reads, to the ideal reader, as its new answer.
    rows = pq.read_table(data.parent / "verified" / "data.parquet").to_pylist()
    for row in rows:
        image = Image.open(BytesIO(row["image"]["bytes"]))
        kind = row["category"]
        answer = ideal_reader.correct_options(image, kind, row["options"])
        assert answer == [option_letters(4).index(row["new_answer"])]


def _judged(data, errors: JudgeErrors) -> tuple[set[str], dict]:
    """The items `verify` keeps with this judge (in a folder of its own linking the set), and its calibration."""
    folder = judge_study._judged_folder(data.parent.parent, data, 0.4, errors)
    return judge_study.judged_subset(folder, errors, PerturbConfig.from_yaml(flaw_study.RECIPE))


def _kept_by(data, errors: JudgeErrors) -> set[str]:
    return _judged(data, errors)[0]


def test_a_judge_with_known_errors_keeps_flawed_and_rejects_good_counterfactuals_at_its_rates(verified):
    """Through `verify`'s own code: the judge's errors change only what they say, at about the rates they say,
    nested (a larger rate errs on every item a smaller one does), and the drift check still rejects what it
    rejects (an unchanged image is never kept, whatever the judge says)."""
    data, _ = verified
    flawed = json.loads(benchmark.flaws_path(data).read_text())["items"]
    ideal = _kept_by(data, JudgeErrors())
    assert ideal == set(pq.read_table(data.parent / "verified" / "data.parquet", columns=["item_id"])["item_id"]
                        .to_pylist())  # the errorless judge is the ideal reader  # fmt: skip
    keeps = {rate: _kept_by(data, JudgeErrors(keep_flawed=rate)) for rate in (0.3, 0.6)}
    rejects = _kept_by(data, JudgeErrors(reject_good=0.5))
    assert ideal < keeps[0.3] < keeps[0.6]
    assert all(item in flawed for item in keeps[0.6] - ideal)  # only flawed items are added
    assert not any(flawed.get(item) == "unchanged" for item in keeps[0.6])  # the drift check is not the judge's
    could = [i for i in flawed if i not in ideal and flawed[i] != "unchanged"]
    share = len(keeps[0.6] - ideal) / len(could)
    assert abs(share - 0.6) < 3 * (0.6 * 0.4 / len(could)) ** 0.5, (share, len(could))
    good_kept = [i for i in ideal if i not in flawed]
    assert rejects < ideal and all(i not in flawed for i in ideal - rejects)  # only good items are removed
    share = len(ideal - rejects) / len(good_kept)
    assert abs(share - 0.5) < 3 * (0.25 / len(good_kept)) ** 0.5, (share, len(good_kept))
    other_seed = _kept_by(data, JudgeErrors(reject_good=0.5, seed=1))
    assert other_seed != rejects and len(other_seed) != len(ideal)


def test_calibration_measures_a_judges_errors_on_counterfactuals_of_known_truth(verified):
    """`verify --calibrate`'s measurement, with judges whose errors are known: the ideal reader rejects every
    flaw but some halfway colours (which read as the new answer) and no clear good edit; a judge that keeps
    flaws at 60% is measured near that, with an interval that holds it."""
    data, _ = verified
    _, ideal = _judged(data, JudgeErrors())
    assert (ideal["items"], ideal["flawed"], ideal["good"], ideal["failed"]) == (200, 100, 100, 0)
    assert ideal["reject_good"] == 0.0 and ideal["image_size"] == [32, 32]
    assert ideal["above_safe"] is False and ideal["safe_keep_flawed"] == calibration.SAFE_KEEP_FLAWED
    kinds = {kind: tuple(map(int, counts.split("/"))) for kind, counts in ideal["kept_by_kind"].items()}
    assert all(kept == 0 for kind, (kept, _) in kinds.items() if kind != "ambiguous") and kinds["ambiguous"][1] == 25
    assert ideal["keep_flawed"] == kinds["ambiguous"][0] / 100 < 0.25
    _, keeper = _judged(data, JudgeErrors(keep_flawed=0.6))
    low, high = keeper["keep_flawed_ci"]
    expected = ideal["keep_flawed"] + 0.6 * (1 - ideal["keep_flawed"])
    assert low <= expected <= high and keeper["reject_good"] == 0.0
    manifest = json.loads(manifest_beside(data.parent.parent / "judges" / "f0.40" / "seed0-keep0.60-reject0.00"
                                          / "verified" / "data.parquet").read_text())  # fmt: skip
    assert manifest["verification"]["calibration"]["keep_flawed"] == keeper["keep_flawed"]


def test_verify_calibrate_records_the_judges_errors_and_the_report_warns_above_the_safe_rate(tmp_path, monkeypatch,
                                                                                            capsys):  # fmt: skip
    """`lmms-contam verify SET --calibrate N` with a judge that keeps 60% of flawed counterfactuals: the rates are
    printed and recorded in the verified set's manifest, and, measured above the study's safe rate (here set
    to 10%), both the command and the report's sentence on the set warn."""
    folder = tmp_path / "set"
    data = flaw_study.flawed_set(folder, 60, 0.4)
    truths = truths_of(data) | calibration_truths(calibration.calibration_items(40))
    monkeypatch.setattr(calibration, "SAFE_KEEP_FLAWED", 0.1)
    with IdealReaderJudge(JudgeErrors(keep_flawed=0.6), truths) as judge:
        endpoint = {"base_url": judge.base_url, "model": "synthetic-ideal-reader", "api_key_env": "NO_KEY",
                    "max_retries": 0}  # fmt: skip
        config = tmp_path / "recipe.yaml"
        config.write_text(yaml.safe_dump({"base": str(flaw_study.RECIPE), "verify": {"judge": {"endpoint": endpoint}}}))
        capsys.readouterr()
        assert main(["verify", str(folder), "--config", str(config), "--calibrate", "40"]) == 0
    printed = capsys.readouterr().out
    record = json.loads(manifest_beside(folder / "verified" / "data.parquet").read_text())["verification"]
    measured = record["calibration"]
    assert (measured["items"], measured["flawed"], measured["good"]) == (40, 20, 20)
    assert measured["keep_flawed"] > 0.1 and measured["above_safe"] and measured["safe_keep_flawed"] == 0.1
    assert f"keeps flawed: {measured['flawed_kept']}/20" in printed and "WARNING: above the 10%" in printed
    monkeypatch.setenv(env_var("synthetic"), str(folder))
    sentence = set_status("synthetic").sentence()
    assert f"Its judge kept {measured['keep_flawed']:.1%} of 20 flawed" in sentence and "WARNING" in sentence


def test_verify_calibrate_that_measured_nothing_fails_and_writes_no_rate(tmp_path, capsys):
    """Defect 4: a judge with no usable verdict on any flawed item gave exit 0 and "keeps flawed: 0/0 = nan%"
    in the manifest. A calibration that measured nothing fails (exit 1) and writes nothing; 0 items and more
    than the bound are refused before any call (defects 16 and 12: 0 was ignored, 10^8 grew to 8 GB)."""
    folder = tmp_path / "set"
    flaw_study.flawed_set(folder, 20, 0.4)
    truths = calibration_truths(calibration.calibration_items(20))
    calls = []

    def silent_on_flaws(body: dict) -> str:
        calls.append(1)
        _, images = request_parts(body)
        truth = truths.get(pixel_digest(images[0]))
        return "I cannot decide." if truth is not None and truth.flawed else json.dumps(verdict(body))

    with ChatEndpoint(silent_on_flaws, "synthetic-ideal-reader") as judge:
        endpoint = {"base_url": judge.base_url, "model": "synthetic-ideal-reader", "api_key_env": "NO_KEY",
                    "max_retries": 0}  # fmt: skip
        config = tmp_path / "recipe.yaml"
        config.write_text(yaml.safe_dump({"base": str(flaw_study.RECIPE), "verify": {"judge": {"endpoint": endpoint}}}))
        capsys.readouterr()
        code = main(["verify", str(folder), "--config", str(config), "--calibrate", "20"])
        err = capsys.readouterr().err
        assert code == 1 and "calibration measured nothing: the judge gave no usable verdict on any flawed item" in err
        assert not (folder / "verified").exists() and "nan" not in err.lower()
        asked = len(calls)
        for count in ("0", "1", "100000000"):
            assert main(["verify", str(folder), "--config", str(config), "--calibrate", count]) == 2
            assert "--calibrate takes 2 to 10,000 items" in capsys.readouterr().err
        assert len(calls) == asked  # refused before any call


def test_verify_calibrate_refuses_a_set_whose_first_image_does_not_read(tmp_path, capsys):
    """The image size a calibration is drawn at comes from the set's first counterfactual: an undecodable one
    ended in a traceback before the set was checked."""
    folder = tmp_path / "set"
    data = flaw_study.flawed_set(folder, 8, 0.4)
    table = pq.read_table(data)
    images = table.column("image").to_pylist()
    images[0] = {"bytes": b"not an image", "path": None}
    pq.write_table(table.set_column(table.schema.get_field_index("image"), "image",
                                    pa.array(images, table.schema.field("image").type)), data)  # fmt: skip
    capsys.readouterr()
    assert main(["verify", str(folder), "--calibrate", "4"]) == 2
    err = capsys.readouterr().err
    assert f"{data}: row 0: unreadable image" in err and "Traceback" not in err, err
