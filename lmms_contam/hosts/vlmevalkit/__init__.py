"""VLMEvalKit: the perturbed sets exported as its custom multiple-choice datasets, and the reader of its work dirs."""
