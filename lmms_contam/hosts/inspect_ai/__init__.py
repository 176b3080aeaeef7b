"""inspect-ai: the perturbed sets as tasks in inspect's registry (`inspect eval lmms_contam/mmstar_contam`), asked
with its own multiple-choice solver and scorer, and the reader of its logs."""

NAME = "inspect-ai"  # as the report shows the host
KEY = "inspect"  # as commands name it
PACKAGE = "lmms_contam"  # the namespace of the tasks in inspect's registry (the entry point's name)
