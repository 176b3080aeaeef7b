"""A real HTTP server on 127.0.0.1 answering the Hugging Face hub's repo-creation and commit API.

Just the calls `HfApi.create_repo` and `HfApi.create_commit` make: repo creation, README metadata
validation, the preupload query (every file "regular", so contents arrive inline) and the NDJSON
commit. Commits are kept per repository; `fail_commits_with` makes every commit answer that status.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackHub:
    def __init__(self, fail_commits_with: int | None = None) -> None:
        self.repos: dict[str, dict] = {}  # repo id -> {"private": bool, "files": {path: bytes}, "commits": [oid]}
        self.authorizations: list[str | None] = []
        self.fail_commits_with = fail_commits_with
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with hub._lock:
                    hub.authorizations.append(self.headers.get("authorization"))
                    status, payload = hub._answer(self.path.split("?")[0], body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def _answer(self, path: str, body: bytes) -> tuple[int, dict]:
        if path == "/api/repos/create":
            request = json.loads(body)
            repo_id = f"{request['organization']}/{request['name']}"
            assert request["type"] == "dataset", request
            url = f"{self.endpoint}/datasets/{repo_id}"
            if repo_id in self.repos:  # as the hub answers: a conflict that still names the repository
                return 409, {"error": "You already created this dataset repo", "url": url}
            self.repos[repo_id] = {"private": request.get("visibility") == "private", "files": {}, "commits": []}
            return 200, {"url": url}
        if path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}
        found = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/(preupload|commit)/main", path)
        if not found or found.group(1) not in self.repos:
            return 404, {"error": f"no such repository or route: {path}"}
        repo = self.repos[found.group(1)]
        if found.group(2) == "preupload":
            files = json.loads(body)["files"]
            return 200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
        if self.fail_commits_with:
            return self.fail_commits_with, {"error": "commit refused by the test"}
        for line in body.splitlines():
            entry = json.loads(line)
            if entry["key"] == "file":
                repo["files"][entry["value"]["path"]] = base64.b64decode(entry["value"]["content"])
        oid = hashlib.sha1(body).hexdigest()
        repo["commits"].append(oid)
        return 200, {"commitUrl": f"{self.endpoint}/datasets/{found.group(1)}/commit/{oid}", "commitOid": oid}

    def __enter__(self) -> LoopbackHub:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
