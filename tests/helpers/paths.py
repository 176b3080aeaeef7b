"""Where the checkout's files are, for tests that read them as a user's copy would."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"  # the top-level link to lmms_contam/configs
PACKAGE_CONFIGS = REPO / "lmms_contam" / "configs"
