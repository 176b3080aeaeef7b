"""Peer contamination detectors run beside semantic perturbation: CircularEval, MM-Detect's
option-order sensitivity and MMStar-style text-only leakage."""
