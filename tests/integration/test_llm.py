"""The shared OpenAI-compatible client against a real loopback HTTP server."""

from __future__ import annotations

import base64
import io
import threading
import time

import pytest
from helpers.loopback import LoopbackServer, completion
from PIL import Image

from lmms_contam.llm import ChatClient, EndpointConfig, image_part


def config(server: LoopbackServer, **overrides) -> EndpointConfig:
    settings = {"model": "test-vlm", "base_url": server.base_url, "api_key_env": "LMMS_CONTAM_TEST_KEY",
                "max_retries": 3, "timeout_s": 5.0}  # fmt: skip
    return EndpointConfig(**{**settings, **overrides})


def test_answer_tokens_cost_and_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("LMMS_CONTAM_TEST_KEY", "sk-test-secret-123")
    with LoopbackServer(lambda body, n: (200, completion("a caption"), 0)) as server:
        client = ChatClient(config(server, usd_per_million_input=2.5, usd_per_million_output=10))
        result = client.complete([{"role": "user", "content": "hi"}], temperature=0.3, max_tokens=800)
    assert (result.text, result.input_tokens, result.output_tokens) == ("a caption", 75, 125)
    assert result.cost_usd == pytest.approx((75 * 2.5 + 125 * 10) / 1e6)
    assert server.headers[0]["authorization"] == "Bearer sk-test-secret-123"
    assert server.requests[0]["temperature"] == 0.3 and server.requests[0]["max_tokens"] == 800
    assert "sk-test-secret-123" not in repr(client.config.as_dict())
    assert client.usage.as_dict()["calls"] == 1


def test_rate_limits_server_errors_and_timeouts_are_retried():
    def script(body, n):
        return {1: (429, {"error": {"message": "slow down"}}, 0), 2: (500, {"error": {"message": "oops"}}, 0),
                3: (200, completion("late"), 3.0)}.get(n, (200, completion("ok"), 0))  # fmt: skip

    with LoopbackServer(script) as server:
        client = ChatClient(config(server, timeout_s=1.0))
        result = client.complete([{"role": "user", "content": "hi"}])
    assert result.text == "ok"
    assert len(server.requests) == 4  # 429, 500, a timeout, then the answer


def test_a_call_that_keeps_failing_is_returned_as_the_error_in_map():
    def script(body, n):
        fail = body["messages"][0]["content"] == "bad"
        return (500, {"error": {"message": "down"}}, 0) if fail else (200, completion("fine"), 0)

    with LoopbackServer(script) as server:
        client = ChatClient(config(server, max_retries=1))
        out = client.map(lambda text: client.complete([{"role": "user", "content": text}]).text,
                         ["good", "bad", "good"], desc="test")  # fmt: skip
    assert out[0] == out[2] == "fine"
    assert isinstance(out[1], Exception) and "down" in str(out[1])
    assert sum(r["messages"][0]["content"] == "bad" for r in server.requests) == 2  # first try + 1 retry


def test_keys_are_refused_in_configs():
    with pytest.raises(ValueError, match="environment variable"):
        EndpointConfig.from_dict({"model": "x", "api_key": "sk-oops"})
    with pytest.raises(ValueError, match="unknown endpoint setting"):
        EndpointConfig.from_dict({"model": "x", "temprature": 0.3})


def test_images_travel_inline():
    part = image_part(Image.new("RGB", (2048, 1024), "red"))
    header, encoded = part["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    decoded = Image.open(io.BytesIO(base64.b64decode(encoded)))
    assert decoded.size == (1024, 512)


def test_the_client_keeps_as_many_calls_in_flight_as_its_concurrency():
    """Counted at the server, which holds each request 0.5 s: wall-clock ratios on a shared machine are not."""
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def slow(body, number):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.5)
        with lock:
            state["now"] -= 1
        return 200, completion("x"), 0.0

    with LoopbackServer(slow) as server:
        for concurrency, items in ((1, 3), (8, 16)):
            state["peak"] = 0
            client = ChatClient(config(server, concurrency=concurrency))
            ask = client.complete
            client.map(lambda i, ask=ask: ask([{"role": "user", "content": str(i)}]), range(items), desc="calls")
            assert state["peak"] == concurrency, (concurrency, state)
