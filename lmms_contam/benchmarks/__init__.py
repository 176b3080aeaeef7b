"""Loaders that turn MMStar, RealWorldQA and NaturalBench (hub or local copy) into items, and importers."""
