"""Image-text contamination: can an eval sample's answer be read off the captions of its matched
pre-training images? A deterministic n-gram pre-filter, then an LLM judge."""

# A verdict's outcomes (shared by the judge, its summary and the flags joined into `*_scanned` tasks).
ANSWERABLE, NOT_ANSWERABLE, UNJUDGED = "answerable", "not answerable", "unjudged"
