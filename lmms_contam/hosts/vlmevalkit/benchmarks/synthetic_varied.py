"""The varied procedural benchmark in VLMEvalKit: a dataset VLMEvalKit does not know, grouped by MMStar's
categories."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import CATEGORIES, VLMEvalKitBinding

BINDING = VLMEvalKitBinding("SyntheticVaried", categories=CATEGORIES)
