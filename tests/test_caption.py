"""Stage 2 (edit caption) against a loopback OpenAI-compatible server, with its keyed store."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import real_photos
from loopback import LoopbackServer, completion
from PIL import Image

from lmms_contam.items import Item
from lmms_contam.llm import ChatClient, EndpointConfig
from lmms_contam.perturb.caption import CaptionSettings, write_caption
from lmms_contam.perturb.store import StageStore

TEMPLATE = Path(__file__).resolve().parents[1] / "configs" / "perturb" / "edit_caption.txt"


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


def test_template_without_fields_and_empty_caption_fail_clearly(item, tmp_path):
    bad = tmp_path / "t.txt"
    bad.write_text("Describe {question}")
    with pytest.raises(ValueError, match=r"template needs \{options\}, \{original_answer\}, \{new_answer\}"):
        CaptionSettings.from_file(bad)
    with LoopbackServer(lambda body, n: (200, completion(" "), 0)) as server:
        client = ChatClient(EndpointConfig(base_url=server.base_url, max_retries=0))
        with pytest.raises(ValueError, match="empty caption"):
            write_caption(client, StageStore(tmp_path), "k", item, "B", CaptionSettings.from_file(TEMPLATE))
    assert StageStore(tmp_path).get("caption", "k") is None
