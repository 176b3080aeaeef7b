"""A real HTTP server on 127.0.0.1 speaking the three GitHub endpoints the release fetch uses: a release
listing (REST API), raw files at a commit, and asset downloads with HTTP Range, with scripted faults."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackGitHub:
    """`raw[path]` and `assets[name]` hold the bytes served; `faults[path]` is a list of faults to apply, one
    per request, in order: "drop" (half the body, then the connection closes), "corrupt" (one byte
    flipped), "drip" (one byte a second until the client gives up), or an HTTP status (403 comes as a
    used-up rate limit). `edit_listing`, where set, changes the release listing's assets before it is served."""

    def __init__(self, repository: str, tag: str) -> None:
        self.repository, self.tag = repository, tag
        self.raw: dict[str, bytes] = {}
        self.assets: dict[str, bytes] = {}
        self.faults: dict[str, list] = {}
        self.requests: list[tuple[str, dict]] = []
        self.digests = True  # list each asset's sha256 digest, as GitHub does for new releases
        self.edit_listing: Callable[[list[dict]], None] | None = None
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                with server._lock:
                    server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                    pending = server.faults.get(self.path) or []
                    fault = pending.pop(0) if pending else None
                body = server._body(self.path)
                if isinstance(fault, int):
                    return self._send(fault, json.dumps({"message": "scripted"}).encode(), rate_limited=fault == 403)
                if body is None:
                    return self._send(404, json.dumps({"message": "Not Found"}).encode())
                if fault == "corrupt":
                    body = body[:-1] + bytes([body[-1] ^ 0xFF])
                start = 0
                ranged = self.headers.get("range")
                if ranged and self.path.startswith("/download/"):
                    start = int(ranged.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        return self._send(416, b"")
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("content-range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("content-length", str(len(body) - start))
                self.end_headers()
                if fault == "drip":
                    return self._drip(body[start:])
                if fault == "drop":
                    self.wfile.write(body[start : start + (len(body) - start) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body[start:])

            def _drip(self, data: bytes) -> None:
                try:
                    for index in range(len(data)):
                        self.wfile.write(data[index : index + 1])
                        self.wfile.flush()
                        time.sleep(1.0)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should
                self.close_connection = True

            def _send(self, status: int, data: bytes, rate_limited: bool = False) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                if rate_limited:
                    self.send_header("x-ratelimit-remaining", "0")
                    self.send_header("x-ratelimit-reset", "1767225600")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def listing_path(self) -> str:
        return f"/api/repos/{self.repository}/releases/tags/{self.tag}"

    def _body(self, path: str) -> bytes | None:
        if path == self.listing_path:
            assets = [{"name": name, "size": len(data), "browser_download_url": f"{self.base}/download/{name}",
                       **({"digest": f"sha256:{hashlib.sha256(data).hexdigest()}"} if self.digests else {})}
                      for name, data in self.assets.items()]  # fmt: skip
            if self.edit_listing:
                self.edit_listing(assets)
            return json.dumps({"tag_name": self.tag, "assets": assets}).encode()
        if path.startswith("/raw/"):
            return self.raw.get(path.removeprefix("/raw/"))
        if path.startswith("/download/"):
            return self.assets.get(path.removeprefix("/download/"))
        return None

    def count(self, prefix: str) -> int:
        return sum(1 for path, _ in self.requests if path.startswith(prefix))

    def paths(self) -> Counter:
        return Counter(path for path, _ in self.requests)

    def environment(self) -> dict[str, str]:
        return {"LMMS_CONTAM_GITHUB_API": f"{self.base}/api", "LMMS_CONTAM_GITHUB_RAW": f"{self.base}/raw"}

    def __enter__(self) -> LoopbackGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
