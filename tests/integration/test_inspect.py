"""The third host: the plugin's tasks in inspect-ai's registry, inspect's own `inspect eval` CLI running them with
its multiple-choice solver against a loopback OpenAI-compatible VLM, and the report reading its logs."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from helpers.inspect_cli import inspect_eval
from helpers.loopback import LoopbackServer
from helpers.loopback_vlm import POLICIES, ScriptedVLM, seeded_letter, shown_in_versions

from lmms_contam.cli import main
from lmms_contam.hosts.inspect_ai.prompt import mcq_prompt

pytest.importorskip("inspect_ai", reason="inspect-ai needs Python 3.11 (the [inspect] extra)")

MODELS = ("oracle", "memoriser", "wrong", "random")
FAMILIES = ("contam", "option_shuffle", "text_only")
TEMPLATE = (
    "Answer the following multiple choice question. The entire content of your response should be of the following "
    "format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of A,B,C,D.\n\n{question}\n\n{choices}"
)


def answered(policy):
    return lambda shown: f"ANSWER: {policy(shown)}"


@pytest.fixture(scope="module")
def mmstar_rows(fixture_sets) -> list[dict]:
    return datasets.load_dataset("parquet", data_files=str(fixture_sets["mmstar"]), split="train").to_list()


@pytest.fixture(scope="module")
def inspect_run(fixture_sets, mmstar_rows, tmp_path_factory) -> tuple[Path, ScriptedVLM, LoopbackServer]:
    """One `inspect eval` of three tasks by four scripted models, each replying in inspect's answer format."""
    shown = [s for family in FAMILIES for s in shown_in_versions("mmstar", family, mmstar_rows)]
    model = ScriptedVLM(shown, {name: answered(policy) for name, policy in POLICIES.items()})
    work = tmp_path_factory.mktemp("inspect-work")
    with pytest.MonkeyPatch.context() as monkeypatch, LoopbackServer(model) as server:
        monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
        logs = inspect_eval(work, server.base_url, [f"lmms_contam/mmstar_{f}" for f in FAMILIES], MODELS)
    return logs, model, server


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_inspect_runs_the_tasks_and_the_report_gives_each_model_its_verdict(inspect_run, mmstar_rows, tmp_path,
                                                                            capsys, with_sets):  # fmt: skip
    logs, model, _ = inspect_run
    assert sum(model.asked.values()) == len(MODELS) * len(model.shown)  # every version of every task asked once
    code, _, err = run_cli(capsys, "report", logs, "--json", tmp_path / "r.json", "--markdown", tmp_path / "r.md")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    short = lambda name: name.removeprefix("openai-api/stub/").removesuffix(" (inspect-ai)")  # noqa: E731
    results = {short(r["model"]): r for r in report["results"]}
    assert set(results) == set(MODELS) and {r["host"] for r in report["results"]} == {"inspect-ai"}
    assert (results["oracle"]["delta"], results["oracle"]["verdict"]) == (0.0, "no evidence")
    moved = sum(row["new_answer"] != row["original_answer"] for row in mmstar_rows) / len(mmstar_rows)
    assert results["memoriser"]["delta"] == pytest.approx(-moved) and results["memoriser"]["verdict"] == "contaminated"
    assert results["memoriser"]["mcnemar_p"] < 0.01
    assert (results["wrong"]["acc_original"], results["wrong"]["acc_perturbed"]) == (0.0, 0.0)
    for variant in ("original", "perturbed"):  # the seeded model's accuracy, worked out from its policy
        asked = [s for s in model.shown if s.variant == variant]
        right = sum(seeded_letter(s, "random") == s.gold for s in asked) / len(asked)
        assert results["random"][f"acc_{variant}"] == pytest.approx(right)
        assert results["random"]["accuracy_averaged_over"] == "items"
    detectors = {(short(d["model"]), d["detector"]): d for d in report["detectors"]}
    assert detectors[("memoriser", "option_shuffle")]["flagged"] and detectors[("memoriser", "option_shuffle")][
        "signal"] == -1.0  # fmt: skip
    assert not detectors[("oracle", "option_shuffle")]["flagged"]
    assert detectors[("oracle", "text_only")]["score"] == 1.0 and detectors[("oracle", "text_only")]["flagged"]
    assert "inspect's multiple_choice()" in results["oracle"]["answer_matching"]
    assert "| inspect-ai |" in (tmp_path / "r.md").read_text()


def test_inspect_asks_with_its_own_template_the_sets_question_and_options(inspect_run, mmstar_rows):
    """What the model sees: inspect's multiple-choice template around the question without its listed options,
    the options as inspect's lettered lines in the version's order, and the image only where the task shows it."""
    _, model, server = inspect_run
    stems = {row["question"].split("\nOptions:")[0].strip() for row in mmstar_rows}
    without_image = 0
    for body in server.requests:
        content = body["messages"][-1]["content"]
        (text,) = [part["text"] for part in content if part["type"] == "text"]
        images = [part for part in content if part["type"] == "image_url"]
        _, question, choices = text.split("\n\n")
        assert question in stems and text == TEMPLATE.format(question=question, choices=choices)
        assert [line[:3] for line in choices.split("\n")] == ["A) ", "B) ", "C) ", "D) "]
        # The prompt the demo's models are trained on (hosts/inspect_ai/prompt.py) is the one inspect sends.
        assert mcq_prompt(question, [line[3:] for line in choices.split("\n")]) == text
        assert len(images) <= 1
        without_image += not images
    assert without_image == len(MODELS) * sum(s.image is None for s in model.shown) > 0


@pytest.fixture(scope="module")
def json_logs(fixture_sets, mmstar_rows, tmp_path_factory) -> dict[str, Path]:
    """The oracle's runs of mmstar_contam as JSON logs: a whole one, one of a subset (--limit), and one where the
    server failed a request and inspect went on (--no-fail-on-error)."""
    model = ScriptedVLM(shown_in_versions("mmstar", "contam", mmstar_rows), {"oracle": answered(POLICIES["oracle"])})

    def failing_one_item(body: dict, number: int):
        """Every request for the first item's versions fails, so no retry recovers it."""
        shown = json.dumps(body["messages"])
        if all(json.dumps(option)[1:-1] in shown for option in mmstar_rows[0]["options"]):
            return 500, {"error": {"message": "overloaded"}}, 0.0
        return model(body, number)

    found = {}
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("LMMS_CONTAM_DATASET_MMSTAR", str(fixture_sets["mmstar"]))
        for name, script, extra in (("whole", model, ()), ("limited", model, ("--limit", "4")),
                                    ("failed", failing_one_item, ("--no-fail-on-error",))):  # fmt: skip
            work = tmp_path_factory.mktemp(f"inspect-{name}")
            with LoopbackServer(script) as server:
                logs = inspect_eval(work, server.base_url, ["lmms_contam/mmstar_contam"], ("oracle",),
                                    "--log-format", "json", *extra)  # fmt: skip
            (found[name],) = logs.glob("*.json")
    return found


def _edited(log: Path, folder: Path, edit) -> Path:
    data = json.loads(log.read_text())
    edit(data)
    folder.mkdir()
    (folder / log.name).write_text(json.dumps(data))
    return folder


def _score_flipped(data: dict) -> None:
    data["samples"][1]["scores"]["choice"]["value"] = "I"


def _accuracy_raised(data: dict) -> None:
    data["results"]["scores"][0]["metrics"]["accuracy"]["value"] = 1.5


def _target_moved(data: dict) -> None:
    sample = data["samples"][0]
    sample["target"] = next(letter for letter in "ABCD" if letter != sample["target"])


def _unfinished(data: dict) -> None:
    data["status"] = "started"


def _another_item(data: dict) -> None:
    for sample in data["samples"][:2]:
        sample["metadata"]["contam"]["item_id"] += "-other"
        sample["id"] = f"{sample['metadata']['contam']['item_id']}:{sample['metadata']['contam']['variant']}"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_score_flipped, "reads as right by inspect's parser"),
        (_accuracy_raised, "states accuracy 1.5"),
        (_target_moved, "its target"),
        (_unfinished, "did not finish (status started"),
        (_another_item, "is not an item of the set that was scored"),
    ],
)
def test_the_report_refuses_an_edited_or_unfinished_log_naming_it(damage, expected, json_logs, tmp_path, capsys,
                                                                   with_sets):  # fmt: skip
    code, _, err = run_cli(capsys, "report", _edited(json_logs["whole"], tmp_path / "edited", damage))
    assert code != 0 and expected in err and json_logs["whole"].name in err, err


def test_the_report_refuses_what_inspect_itself_left_partial(json_logs, capsys, with_sets):
    code, _, err = run_cli(capsys, "report", json_logs["limited"])
    assert code != 0 and "ran a subset of the task" in err, err
    code, _, err = run_cli(capsys, "report", json_logs["failed"])
    assert code != 0 and "failed (" in err and "run the task again" in err, err
    code, _, err = run_cli(capsys, "report", json_logs["whole"])
    assert code == 0, err  # the whole run reads


def test_two_logs_of_one_task_and_model_are_refused(json_logs, tmp_path, capsys, with_sets):
    for copy in ("a", "b"):
        (tmp_path / copy).mkdir()
        (tmp_path / copy / json_logs["whole"].name).write_bytes(json_logs["whole"].read_bytes())
    code, _, err = run_cli(capsys, "report", tmp_path)
    assert code != 0 and "2 logs of mmstar_contam" in err, err


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        ("ANSWER: B", {"B"}),
        ("answer: b", {"B"}),
        ("Answer: (B)", {"B"}),
        ("**ANSWER: B**", {"B"}),
        ("Final answer: B", {"B"}),
        ("ANSWER: A\nANSWER: C", {"C"}),
        ("B", set()),
        ("(B)", set()),
        ("The answer is B", set()),
        ("a cat", set()),
        ("ANSWER: E", set()),
    ],
)
def test_the_reader_reads_replies_as_inspects_parser_does(reply, read):
    """What docs/inspect.md says a reply must look like: inspect's own parser, as the report runs it again."""
    from lmms_contam.hosts.inspect_ai.reader import letters_read

    assert letters_read(reply, 4) == read
