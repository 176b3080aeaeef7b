"""Peer contamination detectors run beside semantic perturbation (CircularEval, MM-Detect's option-order
sensitivity, MMStar-style text-only leakage): one module each, collected in `registry.DETECTORS`."""
