"""RealWorldQA in VLMEvalKit: exported under its VLMEvalKit name; its own dataset pairs (leaderboard mode)."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding

BINDING = VLMEvalKitBinding("RealWorldQA", own_dataset="RealWorldQA")
