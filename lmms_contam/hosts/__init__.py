"""The evaluation harnesses the plugin serves, a folder each: lmms-eval and VLMEvalKit.

A host runs the models; the core below it (registry, sets, perturbation, corpus, statistics, report)
knows no host. Each host has a binding per benchmark (how it runs one) and a reader that turns its
output folders into the report's records.
"""
