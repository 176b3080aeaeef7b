"""SEED-Bench in VLMEvalKit: exported under its image subset's VLMEvalKit name."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding

BINDING = VLMEvalKitBinding("SEEDBench_IMG")
