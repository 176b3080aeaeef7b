"""Benchmarks: the registry of what each one is, the loaders and parsers of their rows, importers of released sets."""
