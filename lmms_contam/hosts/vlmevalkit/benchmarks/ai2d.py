"""AI2D in VLMEvalKit: exported under its VLMEvalKit name."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding

BINDING = VLMEvalKitBinding("AI2D_TEST")
