"""ScienceQA-IMG in VLMEvalKit: exported under its VLMEvalKit name, its context shown as VLMEvalKit's hint."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding

BINDING = VLMEvalKitBinding("ScienceQA_TEST", hint="hint")
