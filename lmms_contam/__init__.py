"""lmms-contam: tells whether a VLM's benchmark score comes from memorised test data."""

__version__ = "0.2.0"
