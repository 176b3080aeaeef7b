"""inspect-ai's own command line on a loopback OpenAI-compatible server, hermetic: its data, cache and control
socket in the work folder, bounded retries and timeout (inspect's defaults retry without end)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def inspect_eval(work: Path, base_url: str, tasks: list[str], models: tuple[str, ...], *extra: str) -> Path:
    """inspect's own command line, as its docs run it, on the loopback server; returns the log folder."""
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    command = ["inspect", "eval", *tasks, "--model", ",".join(f"openai-api/stub/{m}" for m in models),
               "--log-dir", str(logs), "--display", "plain", "--no-log-images", "--max-retries", "0",
               "--timeout", "60", "--max-connections", "4", "--ctl-server", "false", *extra]  # fmt: skip
    env = {**os.environ, "STUB_API_KEY": "not-a-secret", "STUB_BASE_URL": base_url,
           "XDG_DATA_HOME": str(work / "data"), "XDG_CACHE_HOME": str(work / "cache")}  # fmt: skip
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return logs
