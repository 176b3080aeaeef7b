"""Stage 4: the judge (loopback endpoint) and the drift check (real photos)."""

from __future__ import annotations

import io
import json

import pytest
from helpers.fixtures import real_photos
from helpers.loopback import LoopbackServer, completion
from helpers.paths import CONFIGS
from PIL import Image, ImageDraw

from lmms_contam.items import Item
from lmms_contam.llm import ChatClient, EndpointConfig
from lmms_contam.perturb.verify import (
    CounterfactualJudgeSettings,
    DriftSettings,
    UnusableReply,
    drift,
    judge_counterfactual,
    parse_counterfactual_verdict,
)
from lmms_contam.store import StageStore

TEMPLATE = CONFIGS / "perturb" / "judge.txt"


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    return [Image.open(io.BytesIO(data)).convert("RGB") for data in real_photos()[:4]]


def test_parse_verdict_handles_reasoning_and_chatter():
    parse = parse_counterfactual_verdict
    assert parse('{"correct_options": ["b"], "reason": "x"}', 4) == ["B"]
    assert parse('<think>maybe {"correct_options": ["A"]}</think> {"correct_options": ["C"]}', 4) == ["C"]
    assert parse('Sure! {"correct_options": ["A", "D"], "reason": "both"} Hope that helps.', 4) == ["A", "D"]
    assert parse("B", 4) is None
    assert parse('{"correct_options": ["E"]}', 4) is None
    assert parse('{"correct_options": [" (c). "], "reason": "x"}', 4) == ["C"]
    assert parse('{"correct_options": [], "reason": "none fits"}', 4) == []  # a verdict: no option is right


@pytest.mark.parametrize("entries", [["C, A"], ["C A"], ["CA"], ["C", "A or B"], ["Option C"], ["C) a dog"], [""],
                                     ["C\u0000"], [3], "C"])  # fmt: skip
def test_a_reply_that_does_not_name_each_option_unambiguously_is_no_verdict(entries):
    """Read as ["C"] before: one string naming two options (a server that ignores response_format) kept the item."""
    assert parse_counterfactual_verdict(json.dumps({"correct_options": entries, "reason": "x"}), 4) is None


def test_judge_outcomes_are_stored_and_not_asked_twice(photos, tmp_path):
    replies = {"k1": '{"correct_options": ["B"], "reason": "two cats"}',
               "k2": '{"correct_options": ["A", "B"], "reason": "ambiguous"}', "k3": "I cannot tell."}  # fmt: skip

    def script(body, n):
        text = body["messages"][0]["content"][1]["text"]
        return 200, completion(replies[text.split("KEY=")[1].split()[0]]), 0

    item = Item("mmstar", "1", "How many cats?", ("1", "2", "3", "4"), "A", photos[0])
    store = StageStore(tmp_path)
    settings = CounterfactualJudgeSettings(template=TEMPLATE.read_text() + "\nKEY={key} ", temperature=None)
    with LoopbackServer(script) as server:
        client = ChatClient(EndpointConfig(model="o3", base_url=server.base_url, max_retries=0))
        outcomes = {}
        for key in replies:
            keyed = CounterfactualJudgeSettings(template=settings.template.replace("{key}", key), temperature=None)
            for _ in range(2):  # a verdict is stored and not asked again; an unusable reply is asked again
                try:
                    outcomes[key] = judge_counterfactual(client, store, key, item, photos[1], "B", keyed)["outcome"]
                except UnusableReply as exc:
                    outcomes[key] = f"unusable: {exc}"
    unusable = "unusable: the judge's reply names no option unambiguously: 'I cannot tell.'"
    assert outcomes == {"k1": "keep", "k2": "reject", "k3": unusable}
    assert len(server.requests) == 2 + 2
    assert "temperature" not in server.requests[0]
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert json.loads(store.path("judge", "k3").read_text())["reply"] == "I cannot tell."


def test_drift_rejects_unchanged_and_unrelated_and_keeps_a_local_edit(photos):
    settings = DriftSettings()
    original = photos[0]
    assert drift(original, original.copy(), settings)["outcome"] == "reject: unchanged"
    assert drift(original, photos[2].resize(original.size), settings)["outcome"].startswith("reject: no longer")
    edited = original.copy()
    ImageDraw.Draw(edited).rectangle((10, 10, 45, 45), fill=(250, 20, 20))
    verdict = drift(original, edited, settings)
    assert verdict["outcome"] == "keep", verdict


def test_drift_sees_a_recolouring_of_equal_brightness():
    """A colour edit that leaves every grey level as it was is still an edit (a red car made blue)."""
    original = Image.new("RGB", (64, 64), (40, 40, 40))
    ImageDraw.Draw(original).rectangle((8, 8, 40, 40), fill=(200, 60, 60))
    grey = original.convert("L").getpixel((20, 20))
    recoloured = original.copy()
    for green in range(256):  # a blue-green of the same grey level as the red
        if Image.new("RGB", (1, 1), (60, green, 200)).convert("L").getpixel((0, 0)) == grey:
            break
    else:
        raise AssertionError("no colour of equal brightness found")
    ImageDraw.Draw(recoloured).rectangle((8, 8, 40, 40), fill=(60, green, 200))
    assert recoloured.convert("L").tobytes() == original.convert("L").tobytes()
    assert drift(original, recoloured, DriftSettings())["outcome"] == "keep"
