"""A small image corpus of real photos with the awkward kinds an ingest must convert, as files or a folder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from helpers.fixtures import real_photos


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def corpus_files() -> list[tuple[str, bytes, str, str]]:
    """(name, bytes, caption, url): real photos (near-copies of the first four eval images, then
    strangers), the awkward kinds of image that must be converted, and two that cannot be read."""
    photos = [Image.open(io.BytesIO(p)).convert("RGB") for p in real_photos(size=224)]
    files = [(f"{i:04d}.jpg", encoded(ImageOps.mirror(photos[i]) if i % 2 else photos[i], "JPEG", quality=70),
              f"a copy of eval item {i}", f"https://example.org/{i}.jpg") for i in range(4)]  # fmt: skip
    files += [(f"{i:04d}.png", encoded(photos[i], "PNG"), f"stranger {i}", "") for i in range(12, 16)]
    wide = np.asarray(photos[8].convert("L"), dtype=np.uint16) * 257
    frames = [photos[9], photos[10]]
    files += [
        ("0100.jpg", encoded(photos[8].convert("CMYK"), "JPEG"), "a cmyk scan", ""),
        ("0101.png", encoded(Image.fromarray(wide), "PNG"), "a 16-bit photo", ""),
        ("0102.png", encoded(photos[9].convert("RGBA"), "PNG"), "with alpha", ""),
        ("0103.gif", encoded(frames[0], "GIF", save_all=True, append_images=frames[1:]), "animated", ""),
        ("0104.jpg", encoded(photos[11], "JPEG")[:600], "cut off", ""),
        ("0105.jpg", b"", "zero bytes", ""),
    ]
    return files


def write_folder(root: Path, files) -> Path:
    root.mkdir()
    for number, (name, data, caption, url) in enumerate(files):
        (root / name).write_bytes(data)
        if number % 2:  # both sidecar kinds
            (root / name).with_suffix(".txt").write_text(caption)
        else:
            (root / name).with_suffix(".json").write_text(json.dumps({"caption": caption, "url": url}))
    return root
