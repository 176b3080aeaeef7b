"""Image-text contamination: can an eval sample's answer be read off the captions of its matched
pre-training images? A deterministic n-gram pre-filter, then an LLM judge."""
