"""MMStar in VLMEvalKit: exported under its VLMEvalKit name, grouped by its categories; its own dataset pairs."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import CATEGORIES, VLMEvalKitBinding

BINDING = VLMEvalKitBinding("MMStar", categories=CATEGORIES, own_dataset="MMStar")
