"""Everything that touches lmms-eval: registration, dataset resolution, the functions task YAMLs call."""
