"""A benchmark as a VLMEvalKit custom multiple-choice dataset: the binding type every benchmark module under
benchmarks/ fills in, kept apart from the registry (bindings.py) so that the modules it lists can import it.

VLMEvalKit has no plugin registry: a TSV in its data folder whose name it does not know becomes a custom
multiple-choice dataset (question, option columns A, B, ..., answer, image), scored by its own prompt,
model classes and answer matching. Many model classes pick their prompt by the benchmark's name in the
dataset's, so the exported names carry the benchmark's VLMEvalKit name where that is safe.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VLMEvalKitBinding:
    dataset: str  # the exported datasets' names start with it: the benchmark as VLMEvalKit names it, where safe
    categories: tuple[tuple[str, str], ...] = ()  # (set column, TSV column) its accuracy table groups by
    hint: str | None = None  # the set column VLMEvalKit shows as "Hint:" before the question
    # VLMEvalKit's own dataset of the benchmark, where its `index` is the item's original id (the paper authors'
    # released TSVs are joined on it): leaderboard mode pairs a run of it with a run of the perturbed export.
    own_dataset: str | None = None
    # VLMEvalKit's own dataset of the benchmark that it evaluates with CircularEval: its circular result is the
    # report's circular detector (with PRINT_VANILLA=1, which adds each item's hit in the original order).
    own_circular: str | None = None


CATEGORIES = (("category", "category"), ("l2_category", "l2-category"))

# Why a benchmark of yes/no questions cannot be exported (its module's REFUSED says so, with its own reasons).
YES_NO = (
    "VLMEvalKit scores yes/no questions only for the datasets it knows by name (it would replace a TSV under such "
    "a name with its own download), and reads a TSV of its own without option columns as free-form VQA"
)
