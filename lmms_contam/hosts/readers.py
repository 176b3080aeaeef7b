"""Each output folder handed to the reader of the host that wrote it: lmms-eval's `*_results.json` beside its
`*_samples_<task>.jsonl`, VLMEvalKit's judged `<model>_<dataset>_<judge>_result.<xlsx|tsv|json>`. A folder
holding both is read by both; the records are merged for one report."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lmms_contam.hosts.lmms_eval import reader as lmms_eval_reader
from lmms_contam.report.inputs import Loaded


def read_runs(paths: Iterable[str | Path]) -> Loaded:
    return lmms_eval_reader.load([Path(p) for p in paths])
