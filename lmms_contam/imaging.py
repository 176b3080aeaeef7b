"""Image decoding that does not depend on process-wide PIL settings."""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator
from contextlib import contextmanager

from PIL import Image, ImageFile

BLANK_GREY = (128, 128, 128)


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


def decoding_error(error: Exception) -> str:
    """Why bytes are not an image, in words that are the same on every run (PIL's "cannot identify"
    message quotes the stream's repr, whose memory address differs each time)."""
    if isinstance(error, Image.UnidentifiedImageError):
        return "not an image format PIL can read"
    return str(error)


def stored_size(image: dict) -> tuple[int, int]:
    """Width and height of an undecoded datasets image ({"bytes", "path"}), read from its header."""
    source = io.BytesIO(image["bytes"]) if image.get("bytes") is not None else image["path"]
    with Image.open(source) as opened:
        return opened.size


@functools.lru_cache(maxsize=256)
def blank_png(size: tuple[int, int]) -> bytes:
    """A uniform mid-grey PNG: an image that carries no information but its size."""
    buffer = io.BytesIO()
    Image.new("RGB", size, BLANK_GREY).save(buffer, format="PNG")
    return buffer.getvalue()
