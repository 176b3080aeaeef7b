"""lmms-eval: the task YAMLs and the functions they call, their registration, and the reader of its output."""

NAME = "lmms-eval"  # as the report shows the host
KEY = "lmms-eval"  # as commands name it
