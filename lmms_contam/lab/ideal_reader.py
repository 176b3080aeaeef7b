"""The ideal reader of a synthetic scene: what a careful annotator answers from the image alone.

It finds the asked-about shape in the pixels (a cell whose shape differs from the background at the
places where a circle, a square and a triangle differ) and names the option whose colour is nearest
to the shape's, or no option when the shape is missing or no option's colour lies within
`TOLERANCE`. It never sees the scene it was drawn from: the flaw study's judge answers with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

from lmms_contam.synthetic.scenes import CLEAR_NOISE, KINDS, SIZE, shape_box

# RGB distance within which a colour still reads as an option: 3.7 standard deviations of a clear
# item's colour noise (the 99.7% radius of a 3-D Gaussian), so no clear item reads as "none".
TOLERANCE = 3.7 * CLEAR_NOISE
PALETTE = {text: np.array(colour, dtype=float) for kind in KINDS.values() for text, colour in kind.palette.items()}


def _filled(pixels: np.ndarray, background: np.ndarray, x: float, y: float) -> bool:
    return bool(np.any(pixels[int(y), int(x)] != background))


def shapes(image: Image.Image) -> list[tuple[str, np.ndarray]]:
    """(shape, colour) of every shape in the image's four cells."""
    pixels = np.asarray(image.convert("RGB"), dtype=float)
    if pixels.shape[:2] != (SIZE, SIZE):
        raise ValueError(f"a synthetic scene is {SIZE}x{SIZE} pixels; got {pixels.shape[1]}x{pixels.shape[0]}")
    background = pixels[0, 0]  # the margin around every shape shows the background
    found = []
    for cell in range(4):
        left, top, right, bottom = shape_box(cell)
        centre = ((left + right) / 2, (top + bottom) / 2)
        if _filled(pixels, background, left + 1, top + 1):  # only a square reaches its box's top corner
            shape = "square"
        elif _filled(pixels, background, left + 1, bottom - 1):  # a triangle's base spans its box
            shape = "triangle"
        elif _filled(pixels, background, *centre):
            shape = "circle"
        else:
            continue
        found.append((shape, pixels[int(centre[1]), int(centre[0])]))
    return found


def correct_options(image: Image.Image, target: str, options: Sequence[str]) -> list[int]:
    """Indices of the options an ideal reader calls right: the nearest colour, or none."""
    colours = [colour for shape, colour in shapes(image) if shape == target]
    if len(colours) != 1 or any(text not in PALETTE for text in options):
        return []
    distances = [float(np.linalg.norm(colours[0] - PALETTE[text])) for text in options]
    nearest = int(np.argmin(distances))
    return [nearest] if distances[nearest] <= TOLERANCE else []
