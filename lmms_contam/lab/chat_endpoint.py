"""A function of the request served as an OpenAI-compatible chat-completions endpoint on 127.0.0.1, for the
experiment's stand-ins of hosted models: the ideal-reader judge, and the trained models VLMEvalKit asks."""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

from PIL import Image


def request_parts(body: dict) -> tuple[str, list[Image.Image]]:
    """A chat request's text parts joined, and its images (inline data URIs, or file:// paths a client on
    this machine sends instead of the bytes)."""
    parts = [
        part
        for message in body.get("messages", [])
        for part in (
            message.get("content")
            if isinstance(message.get("content"), list)
            else [{"type": "text", "text": str(message.get("content", ""))}]
        )
    ]
    text = "\n".join(part.get("text", "") for part in parts if part.get("type") == "text")
    images = []
    for part in parts:
        if part.get("type") == "image_url":
            url = part["image_url"]["url"]
            if url.startswith("file://"):
                images.append(Image.open(Path(unquote(urlparse(url).path))))
            else:
                images.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return text, images


class ChatEndpoint:
    """Serves `reply(request body) -> text` until it exits; `base_url` is where to send requests."""

    def __init__(self, reply: Callable[[dict], str], model: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                try:
                    text, status = reply(body), 200
                except (KeyError, ValueError, OSError) as exc:  # a request this endpoint cannot answer
                    text, status = None, 400
                    payload = json.dumps({"error": {"message": f"{type(exc).__name__}: {exc}"}}).encode()
                if text is not None:
                    payload = json.dumps(
                        {
                            "id": "chatcmpl-lmms-contam",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model") or model,
                            "choices": [
                                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                            ],
                            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                        }
                    ).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
