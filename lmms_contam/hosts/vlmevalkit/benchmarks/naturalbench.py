"""NaturalBench in VLMEvalKit: refused, with the reason."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import YES_NO

REFUSED = (
    f"NaturalBench's questions are yes/no or two-way, scored by group: {YES_NO}, and its own NaturalBench "
    "evaluation asserts all 7,600 rows"
)
