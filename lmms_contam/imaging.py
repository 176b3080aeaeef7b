"""Image decoding that does not depend on process-wide PIL settings."""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Iterator
from contextlib import contextmanager

from PIL import Image, ImageFile

BLANK_GREY = (128, 128, 128)
THUMBNAIL = 256  # pages (the report, the review gallery) show images at most this large
SMALLEST = 96  # tiny images (the synthetic benchmark's 32x32 scenes) are enlarged, pixels kept sharp
EVIDENCE = 1280  # the report's image pairs open at their full size up to this (a 1,000 px photo whole)
EVIDENCE_SMALLEST = 320  # and are shown at least this large


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


def data_uri(image: Image.Image, max_side: int, image_format: str = "PNG", smallest: int = 0) -> str:
    """An image inline as a data: URI, shrunk to `max_side` (and enlarged to `smallest`, pixels kept
    sharp). PNG keeps every pixel, for a model to read; JPEG keeps pages small."""
    copy = image.convert("RGB")
    if smallest and max(copy.size) < smallest:
        scale = -(-smallest // max(copy.size))
        copy = copy.resize((copy.width * scale, copy.height * scale), Image.Resampling.NEAREST)
    copy.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    copy.save(buffer, format=image_format, **({"quality": 85} if image_format == "JPEG" else {}))
    return f"data:image/{image_format.lower()};base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def thumbnail_uri(image: Image.Image) -> str:
    """An image as a page shows it: a JPEG thumbnail."""
    return data_uri(image, THUMBNAIL, "JPEG", SMALLEST)


def evidence_uri(image: Image.Image) -> str:
    """An image as the report shows it, large enough to see an edit in a photo when opened (up to
    EVIDENCE pixels a side; small scenes enlarged to EVIDENCE_SMALLEST, pixels kept sharp)."""
    return data_uri(image, EVIDENCE, "JPEG", EVIDENCE_SMALLEST)
