"""The record every scored document logs: what the task writes is what the readers get back, or a refusal."""

from __future__ import annotations

import pytest

from lmms_contam.records import ContamRecord


def test_a_logged_record_reads_back_as_it_was_written():
    record = ContamRecord("mmstar", "mmstar-7-s0", "7", "perturbed", 1, 4, gold="B", stratum="math",
                          set_manifest="ab" * 32, text_only_input=None)  # fmt: skip
    assert ContamRecord.from_logged(record.as_logged(), "x") == record


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": 0}, "f.jsonl:3: schema version 0"),
        ({"correct": True}, "f.jsonl:3: contam_ids.correct is True, expected 0 or 1"),
        ({"correct": 2}, "f.jsonl:3: contam_ids.correct is 2, expected 0 or 1"),
        ({"variant": None}, "f.jsonl:3: contam_ids lacks variant"),
    ],
)
def test_a_record_that_cannot_be_read_is_refused_where_it_was_read(change, message):
    logged = {**ContamRecord("mmstar", "a", "a", "original", 1, 4).as_logged(), **change}
    logged = {key: value for key, value in logged.items() if value is not None}
    with pytest.raises(ValueError, match=message):
        ContamRecord.from_logged(logged, "f.jsonl:3")
    with pytest.raises(ValueError, match="f.jsonl:3: no contam_ids"):
        ContamRecord.from_logged(None, "f.jsonl:3")
