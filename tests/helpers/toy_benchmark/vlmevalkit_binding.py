"""The toy benchmark's VLMEvalKit layer: the name its exports start with, and the column its accuracy groups by."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import VLMEvalKitBinding

BINDING = VLMEvalKitBinding("ToyQuiz", categories=(("topic", "category"),))
