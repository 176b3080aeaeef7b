"""Stage 3 with tiny random Flux pipelines loaded through the same from_pretrained path as real ids."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from fixtures import real_photos
from PIL import Image
from tiny_flux import build_tiny_flux_controlnet, build_tiny_flux_kontext

from lmms_contam.perturb.edit import EditRequest, FluxEditor, FluxSettings, canny_edges, round_to_16


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    return [Image.open(io.BytesIO(data)).convert("RGB") for data in real_photos()[:3]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("flux")
    base, controlnet = build_tiny_flux_controlnet(folder)
    return {"base": str(base), "controlnet": str(controlnet), "kontext": str(build_tiny_flux_kontext(folder))}


def requests(photos, seeds=(1, 2, 3)) -> list[EditRequest]:
    return [EditRequest(f"item-{i}", photo, "two cats on a sofa", seed) for i, (photo, seed) in
            enumerate(zip(photos, seeds, strict=True))]  # fmt: skip


@pytest.mark.parametrize("backend", ["controlnet", "kontext"])
def test_editor_returns_one_image_per_request_at_the_rounded_size(backend, tiny, photos):
    settings = FluxSettings(backend=backend, base_model=tiny[backend if backend == "kontext" else "base"],
                            controlnet=tiny["controlnet"], steps=2, device="cpu", batch_size=2,
                            max_sequence_length=32)  # fmt: skip
    editor = FluxEditor(settings)
    images = editor.edit(requests(photos))
    assert [image.size for image in images] == [round_to_16(photo.size) for photo in photos]
    again = editor.edit(requests(photos))
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(images, again, strict=True))
    reseeded = editor.edit(requests(photos, seeds=(9, 2, 3)))
    assert not np.array_equal(np.asarray(images[0]), np.asarray(reseeded[0]))
    assert np.array_equal(np.asarray(images[1]), np.asarray(reseeded[1]))  # batching does not mix seeds
    described = editor.describe()
    assert described["dtype_used"] == "torch.float32" and described["editor"] == f"flux-{backend}"
    assert described["models"]["base_model"]["local_path"] == str(Path(settings.base_model).resolve())
    assert ("controlnet" in described["models"]) == (backend == "controlnet")


def test_canny_map_and_rounding(photos):
    edges = np.asarray(canny_edges(photos[0], 100, 200))
    assert edges.shape[2] == 3 and 0.01 < (edges[..., 0] > 0).mean() < 0.5
    assert round_to_16((100, 57)) == (96, 64) and round_to_16((5, 5)) == (16, 16)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="backend"):
        FluxSettings(backend="sdxl")
