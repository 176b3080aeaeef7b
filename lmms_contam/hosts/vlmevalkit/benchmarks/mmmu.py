"""MMMU in VLMEvalKit: exported under its VLMEvalKit name."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding

BINDING = VLMEvalKitBinding("MMMU_DEV_VAL")
