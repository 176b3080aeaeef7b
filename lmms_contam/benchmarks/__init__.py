"""Loaders that turn the benchmarks (hub or local copy) into items, and importers of released sets."""

# Every benchmark the loaders read (scan, judge, `*_scanned` tasks); the perturbation pipeline takes
# the first three.
SCANNABLE = ("mmstar", "realworldqa", "naturalbench", "seedbench", "mmbench", "mme")
