"""MME in VLMEvalKit: refused, with the reason."""

from lmms_contam.hosts.vlmevalkit.custom_dataset import YES_NO

REFUSED = f"MME asks yes/no questions: {YES_NO}"
