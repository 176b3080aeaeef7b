"""Stage 3: regenerate the image so the new answer is right.

Every editor takes the same requests and returns images in the same order, so a diffusion backend
and a procedural one (for controlled experiments) are interchangeable. The Flux backends load
real model ids through diffusers' `from_pretrained`; tests pass folders of tiny random pipelines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image

from lmms_contam.perturb.xflux import edge_map, size_rounded_down
from lmms_contam.stats import stable_seed


@dataclass(frozen=True)
class EditRequest:
    key: str
    image: Image.Image  # the original
    caption: str  # the edit caption (ControlNet) or instruction (Kontext)
    seed: int


class Editor(Protocol):
    def edit(self, requests: Sequence[EditRequest]) -> list[Image.Image]: ...

    def describe(self) -> dict: ...


SAMPLERS = {"diffusers", "xflux"}
EDGE_MAPS = {"grey", "xflux"}
ROUNDINGS = {"nearest", "down"}


@dataclass(frozen=True)
class FluxSettings:
    """Defaults are the paper's: FLUX.1-dev, Canny (100, 200), control 0.8, 25 steps, guidance 4, true CFG 3.5."""

    backend: str = "controlnet"  # "controlnet" (text-to-image on the Canny map) or "kontext" (instruction edit)
    base_model: str = "black-forest-labs/FLUX.1-dev"
    controlnet: str = "XLabs-AI/flux-controlnet-canny-diffusers"
    revision: str | None = None
    canny_low: int = 100
    canny_high: int = 200
    conditioning_scale: float = 0.8
    steps: int = 25
    guidance_scale: float = 4.0
    true_cfg_scale: float = 3.5
    negative_prompt: str = ""
    sampler: str = "diffusers"  # "diffusers": FluxControlNetPipeline as it is; "xflux": the authors' loop (xflux.py)
    cfg_start_step: int = 0  # the first step with true CFG; only the xflux sampler can start later (paper: 5)
    edge_map: str = "grey"  # "grey": Canny on the grey image at the output size; "xflux": the authors' annotator
    size_rounding: str = "nearest"  # each side to the nearest multiple of 16, or "down" to one (x-flux)
    seed: int | None = None  # None: a seed per item, hashed from its key; a number: that seed for every item
    max_sequence_length: int = 512
    batch_size: int = 1
    dtype: str = "bfloat16"  # on GPU; the CPU always runs float32
    device: str = "cuda"
    cpu_offload: bool = False

    def __post_init__(self) -> None:
        if self.backend not in ("controlnet", "kontext"):
            raise ValueError(f"generate.backend must be 'controlnet' or 'kontext', got {self.backend!r}")
        if self.batch_size < 1 or self.steps < 1:
            raise ValueError("generate.batch_size and generate.steps must be at least 1")
        for field, allowed in (("sampler", SAMPLERS), ("edge_map", EDGE_MAPS), ("size_rounding", ROUNDINGS)):
            if getattr(self, field) not in allowed:
                raise ValueError(f"generate.{field} must be one of {sorted(allowed)}, got {getattr(self, field)!r}")
        if self.sampler == "xflux" and self.backend != "controlnet":
            raise ValueError("generate.sampler 'xflux' samples with a ControlNet: it needs backend 'controlnet'")
        if self.cfg_start_step and self.sampler != "xflux":
            raise ValueError("generate.cfg_start_step needs sampler 'xflux' (diffusers applies true CFG from step 0)")

    def seed_for(self, key: str) -> int:
        return self.seed if self.seed is not None else stable_seed("edit", key) % 2**31

    def output_size(self, size: tuple[int, int]) -> tuple[int, int]:
        return size_rounded_down(size) if self.size_rounding == "down" else round_to_16(size)

    def control_image(self, image: Image.Image, size: tuple[int, int]) -> Image.Image:
        if self.edge_map == "xflux":
            return edge_map(image, *size, self.canny_low, self.canny_high)
        return canny_edges(image.resize(size), self.canny_low, self.canny_high)


def model_source(name_or_path: str, revision: str | None = None) -> dict:
    """Exactly which weights: a local folder's path, or a hub id's commit as resolved in the local cache that
    `from_pretrained` fills (looked up without network; commit None when the cache does not hold it)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return {"id": name_or_path, "local_path": str(path.resolve())}
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        commit = Path(snapshot_download(name_or_path, revision=revision, local_files_only=True)).name
    except (LocalEntryNotFoundError, HFValidationError):  # not cached, or a folder that has since moved
        commit = None
    return {"id": name_or_path, "revision": revision, "commit": commit}


def round_to_16(size: tuple[int, int]) -> tuple[int, int]:
    return tuple(max(16, int(round(side / 16)) * 16) for side in size)  # type: ignore[return-value]


def canny_edges(image: Image.Image, low: int, high: int) -> Image.Image:
    import cv2

    edges = cv2.Canny(np.asarray(image.convert("L")), low, high)
    return Image.fromarray(np.stack([edges] * 3, axis=-1))


class FluxEditor:
    def __init__(self, settings: FluxSettings) -> None:
        self.settings = settings
        self._pipe = None

    def describe(self) -> dict:
        s = self.settings
        models = {"base_model": model_source(s.base_model, s.revision)}
        if s.backend == "controlnet":
            models["controlnet"] = model_source(s.controlnet)
        return {"editor": f"flux-{s.backend}", **asdict(s), "dtype_used": str(self._dtype()), "models": models}

    def _dtype(self):
        import torch

        return getattr(torch, self.settings.dtype) if self.settings.device.startswith("cuda") else torch.float32

    def _pipeline(self):
        if self._pipe is None:
            from diffusers import FluxControlNetModel, FluxControlNetPipeline, FluxKontextPipeline

            from lmms_contam.perturb.xflux_sampler import XFluxControlNetPipeline

            s, dtype = self.settings, self._dtype()
            if s.backend == "controlnet":
                controlnet = FluxControlNetModel.from_pretrained(s.controlnet, torch_dtype=dtype)
                loader = XFluxControlNetPipeline if s.sampler == "xflux" else FluxControlNetPipeline
                pipe = loader.from_pretrained(
                    s.base_model, controlnet=controlnet, torch_dtype=dtype, revision=s.revision
                )
            else:
                pipe = FluxKontextPipeline.from_pretrained(s.base_model, torch_dtype=dtype, revision=s.revision)
            if s.cpu_offload:
                pipe.enable_model_cpu_offload()
            else:
                pipe.to(s.device)
            pipe.set_progress_bar_config(disable=True)
            self._pipe = pipe
        return self._pipe

    def edit(self, requests: Sequence[EditRequest]) -> list[Image.Image]:
        """Batches of same-size requests; each image has its own seeded generator."""
        by_size: dict[tuple[int, int], list[int]] = defaultdict(list)
        for index, request in enumerate(requests):
            by_size[self.settings.output_size(request.image.size)].append(index)
        outputs: list[Image.Image | None] = [None] * len(requests)
        for size, indices in by_size.items():
            for start in range(0, len(indices), self.settings.batch_size):
                chunk = indices[start : start + self.settings.batch_size]
                images = self._generate([requests[i] for i in chunk], size)
                for i, image in zip(chunk, images, strict=True):
                    outputs[i] = image
        return outputs  # type: ignore[return-value]

    def _generate(self, batch: list[EditRequest], size: tuple[int, int]) -> list[Image.Image]:
        import torch

        s, (width, height) = self.settings, size
        prompts = [r.caption for r in batch]
        if s.backend == "kontext":
            return self._pipeline()(
                prompt=prompts,
                image=[r.image.convert("RGB").resize(size) for r in batch],
                height=height,
                width=width,
                num_inference_steps=s.steps,
                guidance_scale=s.guidance_scale,
                max_area=width * height,
                generator=[torch.Generator("cpu").manual_seed(r.seed) for r in batch],
                max_sequence_length=s.max_sequence_length,
                _auto_resize=False,
            ).images
        edges = [s.control_image(r.image, size) for r in batch]
        if s.sampler == "xflux":
            return self._pipeline().sample(
                prompts,
                edges,
                width=width,
                height=height,
                seeds=[r.seed for r in batch],
                steps=s.steps,
                guidance_scale=s.guidance_scale,
                true_cfg_scale=s.true_cfg_scale,
                cfg_start_step=s.cfg_start_step,
                conditioning_scale=s.conditioning_scale,
                negative_prompt=s.negative_prompt,
                max_sequence_length=s.max_sequence_length,
            )
        return self._pipeline()(
            prompt=prompts,
            control_image=edges,
            height=height,
            width=width,
            num_inference_steps=s.steps,
            controlnet_conditioning_scale=s.conditioning_scale,
            guidance_scale=s.guidance_scale,
            negative_prompt=[s.negative_prompt] * len(batch),
            true_cfg_scale=s.true_cfg_scale,
            generator=[torch.Generator("cpu").manual_seed(r.seed) for r in batch],
            max_sequence_length=s.max_sequence_length,
        ).images
