"""VLMEvalKit: the perturbed sets exported as its custom multiple-choice datasets, and the reader of its work dirs."""

NAME = "VLMEvalKit"  # as the report shows the host
KEY = "vlmevalkit"  # as commands name it
