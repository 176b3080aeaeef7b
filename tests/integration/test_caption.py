"""Stage 2 (edit caption) against a loopback OpenAI-compatible server, with its keyed store."""

from __future__ import annotations

import pytest
from helpers.fixtures import real_photos
from helpers.loopback import LoopbackServer, completion
from helpers.paths import CONFIGS
from PIL import Image

from lmms_contam.items import Item
from lmms_contam.llm import ChatClient, EndpointConfig
from lmms_contam.perturb.caption import CaptionSettings, write_caption
from lmms_contam.store import StageStore

TEMPLATE = CONFIGS / "perturb" / "edit_caption.txt"


@pytest.fixture
def item() -> Item:
    import io

    photo = Image.open(io.BytesIO(real_photos()[1]))
    return Item("mmstar", "7", "How many cats are in the picture?", ("1", "2", "3", "4"), "A", photo)


def test_caption_request_record_and_no_repeat_call(item, tmp_path):
    with LoopbackServer(lambda body, n: (200, completion("  Two tabby cats on a sofa.  "), 0)) as server:
        client = ChatClient(EndpointConfig(model="gpt-4o", base_url=server.base_url, max_retries=0))
        store = StageStore(tmp_path)
        settings = CaptionSettings.from_file(TEMPLATE)
        record = write_caption(client, store, "mmstar-7", item, "B", settings)
        again = write_caption(client, store, "mmstar-7", item, "B", settings)
        changed = write_caption(
            client, store, "mmstar-7", item, "B", CaptionSettings(settings.template + "\nBe brief.")
        )
    assert record == again and record["caption"] == "Two tabby cats on a sofa."
    assert len(server.requests) == 2  # the rerun reused the stored caption; a new template did not
    request = server.requests[0]
    assert (request["model"], request["temperature"], request["max_tokens"]) == ("gpt-4o", 0.3, 800)
    image, text = request["messages"][0]["content"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    assert "How many cats are in the picture?" in text["text"] and "B. 2" in text["text"]
    assert "correct option is A" in text["text"] and "option B is the correct one" in text["text"]
    assert record["input_tokens"] == 75 and record["template_sha256"] == settings.template_sha256
    assert changed["template_sha256"] != record["template_sha256"]


def test_a_stored_caption_is_reused_only_for_the_same_inputs(item, tmp_path):
    """Each input changed in turn: the rerun asks again and stores what a fresh run would."""
    import dataclasses

    from PIL import ImageOps

    def script(body, n):
        return 200, completion(f"caption {n} by {body['model']}"), 0

    settings = CaptionSettings.from_file(TEMPLATE)
    with LoopbackServer(script) as server, LoopbackServer(script) as other_server:
        client = ChatClient(EndpointConfig(model="gpt-4o", base_url=server.base_url, max_retries=0))
        store = StageStore(tmp_path / "store")
        write_caption(client, store, "mmstar-7", item, "B", settings)
        changes = {
            "image": (client, dataclasses.replace(item, image=ImageOps.mirror(item.image)), "B", settings),
            "question": (client, dataclasses.replace(item, question=item.question + " Look closely."), "B", settings),
            "options": (client, dataclasses.replace(item, options=("1", "2", "3", "5")), "B", settings),
            "new answer": (client, item, "C", settings),
            "model": (
                ChatClient(EndpointConfig(model="gpt-4.1", base_url=server.base_url, max_retries=0)),
                item,
                "B",
                settings,
            ),
            "server": (
                ChatClient(EndpointConfig(model="gpt-4o", base_url=other_server.base_url, max_retries=0)),
                item,
                "B",
                settings,
            ),
            "temperature": (client, item, "B", dataclasses.replace(settings, temperature=0.7)),
            "max tokens": (client, item, "B", dataclasses.replace(settings, max_tokens=100)),
        }
        for name, (caller, changed_item, answer, changed_settings) in changes.items():
            calls = len(server.requests) + len(other_server.requests)
            write_caption(caller, store, "mmstar-7", changed_item, answer, changed_settings)
            assert len(server.requests) + len(other_server.requests) == calls + 1, name
            again = write_caption(caller, store, "mmstar-7", changed_item, answer, changed_settings)
            assert len(server.requests) + len(other_server.requests) == calls + 1, f"{name}: asked twice"
            fresh = write_caption(caller, StageStore(tmp_path / name), "mmstar-7", changed_item, answer,
                                  changed_settings)  # fmt: skip
            assert {k: v for k, v in again.items() if k != "caption"} == {
                k: v for k, v in fresh.items() if k != "caption"
            }, name


def test_template_without_fields_and_empty_caption_fail_clearly(item, tmp_path):
    bad = tmp_path / "t.txt"
    bad.write_text("Describe {question}")
    with pytest.raises(ValueError, match=r"template needs \{options\}, \{original_answer\}, \{new_answer\}"):
        CaptionSettings.from_file(bad)
    with LoopbackServer(lambda body, n: (200, completion(" "), 0)) as server:
        client = ChatClient(EndpointConfig(base_url=server.base_url, max_retries=0))
        with pytest.raises(ValueError, match="empty caption"):
            write_caption(client, StageStore(tmp_path), "k", item, "B", CaptionSettings.from_file(TEMPLATE))
    assert not StageStore(tmp_path).path("caption", "k").exists()
