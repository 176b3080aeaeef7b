"""Image decoding that does not depend on process-wide PIL settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from PIL import ImageFile


@contextmanager
def strict_decoding() -> Iterator[None]:
    """lmms-eval sets PIL's LOAD_TRUNCATED_IMAGES for the whole process, which silently pads a
    cut-off file with grey; a check that must see broken files turns it off while it runs."""
    lenient = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        yield
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = lenient
