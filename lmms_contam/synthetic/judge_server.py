"""The ideal reader served as an OpenAI-compatible chat endpoint on 127.0.0.1.

`lmms-contam verify` then runs on a synthetic set exactly as on a real one with a model endpoint:
the same prompt, client, stored verdicts, drift check and kept subset; only the model differs. The
server reads what any judge model reads (the image, the question and the lettered options from the
prompt) and replies in the verification judge's JSON format.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image

from lmms_contam.letters import option_letters
from lmms_contam.llm import EndpointConfig
from lmms_contam.synthetic import reader

MODEL = "synthetic-ideal-reader"
_TARGET = re.compile(r"What colou?r is the (\w+)\?")
_OPTION = re.compile(r"^([A-Z])\. (.+)$", re.MULTILINE)


def verdict(body: dict) -> dict:
    """The judge's reply to one chat-completions request: the correct option letters and why."""
    parts = [part for message in body.get("messages", []) for part in message.get("content", [])
             if isinstance(part, dict)]  # fmt: skip
    text = "\n".join(part.get("text", "") for part in parts if part.get("type") == "text")
    urls = [part["image_url"]["url"] for part in parts if part.get("type") == "image_url"]
    target = _TARGET.search(text)
    options = _OPTION.findall(text)
    if len(urls) != 1 or not target or not options:
        return {"correct_options": [], "reason": "no single image, target shape or lettered options in the prompt"}
    image = Image.open(io.BytesIO(base64.b64decode(urls[0].split(",", 1)[1])))
    letters = [letter for letter, _ in options]
    if letters != option_letters(len(letters)):
        return {"correct_options": [], "reason": f"options are not lettered from A: {letters}"}
    correct = reader.correct_options(image, target.group(1), [text.strip() for _, text in options])
    reason = (f"the {target.group(1)} reads as {options[correct[0]][1].strip()}" if correct
              else f"no {target.group(1)} whose colour is within {reader.TOLERANCE:.0f} of an option")  # fmt: skip
    return {"correct_options": [letters[i] for i in correct], "reason": reason}


class IdealReaderJudge:
    """A context manager serving `verdict` until it exits; `endpoint` is its judge endpoint setting."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                reply = json.dumps(verdict(body))
                payload = json.dumps({
                    "id": "chatcmpl-ideal-reader", "object": "chat.completion", "created": 0, "model": MODEL,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> EndpointConfig:
        port = self._httpd.server_address[1]
        return EndpointConfig(model=MODEL, base_url=f"http://127.0.0.1:{port}/v1", api_key_env="LMMS_CONTAM_NO_KEY",
                              max_retries=2, timeout_s=30.0, concurrency=4)  # fmt: skip

    def __enter__(self) -> IdealReaderJudge:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
