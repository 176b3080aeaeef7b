"""The one redaction applied to stored and logged texts, and the atomic writes' orphan clean-up."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lmms_contam.atomic import HOST, atomic_path, atomic_paths
from lmms_contam.redact import MASK, environment_secrets, redact

KEY = "my-own-server-key-31337"


@pytest.mark.parametrize(
    ("text", "gone", "kept"),
    [
        (f"Incorrect API key provided: {KEY}.", KEY, "Incorrect API key provided:"),
        ("Error code: 401 - {'error': 'bad key sk-proj-AbCdEfGhIjKlMnOpQrStUv'}", "sk-proj-AbCd", "Error code: 401"),
        ("header was Authorization: Bearer eyJhbGciOi.payload.sig", "eyJhbGciOi", "Authorization: Bearer"),
        ("retry with api_key=abcdefgh12345678&model=x", "abcdefgh1234", "&model=x"),
        ('{"token": "0123456789abcdef"}', "0123456789abcdef", '{"token": "'),
        ("hf_AbCdEfGhIjKlMnOpQrStUvWx and ghp_AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGh", " and "),
        ("token limit exceeded; the tokenizer_config is fine", "", "token limit exceeded; the tokenizer_config"),
    ],
)
def test_keys_tokens_and_key_shaped_strings_are_removed_and_prose_is_kept(text, gone, kept):
    redacted = redact(text, [KEY])
    assert kept in redacted
    if gone:
        assert gone not in redacted and MASK in redacted
    else:
        assert redacted == text


def test_the_configured_variable_and_the_usual_ones_are_secrets(monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", KEY)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    assert {KEY, "hf_secret_value"} <= set(environment_secrets("MY_JUDGE_KEY"))


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "out.json"
    code = ("import os, sys; from lmms_contam.atomic import atomic_path\n"
            f"with atomic_path({str(target)!r}) as tmp:\n    tmp.write_text('partial'); os._exit(9)")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code]).returncode == 9  # died inside the block, like SIGKILL
    (orphan,) = tmp_path.glob(".out.json.*.tmp")
    live = tmp_path / f".out.json.{HOST}-{os.getpid()}.keep.tmp"  # a running writer's file stays
    live.write_text("in progress")
    assert not target.exists()
    with atomic_path(target) as tmp:
        tmp.write_text("whole")
    assert target.read_text() == "whole" and not orphan.exists() and live.exists()


def test_outputs_appear_together_or_not_at_all(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(OSError), atomic_paths([tmp_path / "one.md", tmp_path / "a-file" / "two.md"]) as temps:
        for tmp in temps:
            tmp.write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    with pytest.raises(RuntimeError), atomic_paths([tmp_path / "one.md", tmp_path / "two.md"]) as temps:
        temps[0].write_text("x")
        raise RuntimeError("rendering failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
