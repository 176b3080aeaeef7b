"""The varied procedural benchmark in lmms-eval: the synthetic benchmark's task (MMStar's documents and scoring;
its categories are the same target shapes)."""

from __future__ import annotations

from lmms_contam.hosts.lmms_eval.benchmarks.synthetic import BINDING

__all__ = ["BINDING"]
