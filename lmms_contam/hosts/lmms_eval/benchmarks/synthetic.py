"""The procedural benchmark in lmms-eval: a task of the package's own (lmms-eval has none), with MMStar's documents
and scoring."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.benchmarks.mmstar import MMSTAR_SCORER, mmstar_doc
from lmms_contam.hosts.lmms_eval.builtin import LmmsEvalBinding

BINDING = LmmsEvalBinding(
    MMSTAR_SCORER, mmstar_doc, own_task_yaml="synthetic/lmms_eval_task.yaml", letter_request_in_post_prompt=True
)
