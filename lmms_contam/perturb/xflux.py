"""The paper authors' image preparation (XLabs' x-flux, as they ran it): output size and Canny control image.

The sampling loop that goes with it is `xflux_sampler.py`; these two stay free of torch and diffusers so a
recipe can be read and checked without loading them.
"""

from __future__ import annotations

import numpy as np
from PIL import Image


def size_rounded_down(size: tuple[int, int]) -> tuple[int, int]:
    """x-flux's output size: each side down to a multiple of 16 (667 -> 656)."""
    return tuple(max(16, side // 16 * 16) for side in size)  # type: ignore[return-value]


def _as_hwc3(image: Image.Image) -> np.ndarray:
    """The image as 3 uint8 channels, as x-flux's annotator reads a PIL image: grey repeated, alpha over white."""
    if image.mode not in ("L", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    pixels = np.asarray(image)
    if pixels.ndim == 2:
        return np.repeat(pixels[..., None], 3, axis=2)
    if pixels.shape[2] == 4:
        alpha = pixels[..., 3:].astype(np.float32) / 255.0
        return (pixels[..., :3] * alpha + 255.0 * (1.0 - alpha)).clip(0, 255).astype(np.uint8)
    return pixels


def edge_map(image: Image.Image, width: int, height: int, low: int = 100, high: int = 200) -> Image.Image:
    """x-flux's Canny control image: Canny on the RGB image scaled so its short side is the output's long side
    (area interpolation, edge-padded to a multiple of 64), cropped back, then resized bilinearly to the output
    size, so the map keeps grey levels."""
    import cv2

    pixels = _as_hwc3(image)
    rows, cols = pixels.shape[:2]
    scale = max(width, height) / min(rows, cols)
    scaled_rows, scaled_cols = int(np.round(rows * scale)), int(np.round(cols * scale))
    scaled = cv2.resize(pixels, (scaled_cols, scaled_rows), interpolation=cv2.INTER_AREA)
    padded = np.pad(scaled, [[0, -scaled_rows % 64], [0, -scaled_cols % 64], [0, 0]], mode="edge")
    edges = cv2.Canny(padded, low, high)[:scaled_rows, :scaled_cols]
    resized = cv2.resize(np.repeat(edges[..., None], 3, axis=2), (width, height), interpolation=cv2.INTER_LINEAR)
    return Image.fromarray(resized)
