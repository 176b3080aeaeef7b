"""lmms-eval: the task YAMLs and the functions they call, their registration, and the reader of its output."""
