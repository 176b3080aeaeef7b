"""Corpus side: embed eval and pre-training images, scan for near-duplicates, contamination rates."""
