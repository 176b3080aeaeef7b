"""The paper authors' sampling loop (XLabs' x-flux, as they ran it) on diffusers' Flux components.

diffusers' `FluxControlNetPipeline` departs from x-flux in three ways that change the images: it applies
true CFG from the first step (x-flux from `timestep_to_start_cfg`, 5 in its command line), it reuses the
positive pass's ControlNet residuals for the negative prompt (x-flux runs the ControlNet again on the
negative text), and its time grid comes from the scheduler's config. This subclass keeps diffusers'
loading and text encoding and runs x-flux's loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from diffusers import FluxControlNetPipeline
from diffusers.pipelines.flux.pipeline_flux_controlnet import retrieve_latents
from PIL import Image


def schedule(steps: int, image_tokens: int) -> list[float]:
    """x-flux's time grid: `steps + 1` points from 1 to 0, shifted towards 1 by an amount linear in the
    number of image tokens (0.5 at 256 tokens, 1.15 at 4096)."""
    mu = 0.5 + (1.15 - 0.5) * (image_tokens - 256) / (4096 - 256)
    grid = torch.linspace(1, 0, steps + 1)
    return (math.exp(mu) / (math.exp(mu) + (1 / grid - 1))).tolist()


@dataclass(frozen=True)
class _Conditioning:
    """What every velocity evaluation of one `sample` call shares, so that `_velocity` takes it as one value."""

    control: torch.Tensor
    image_ids: torch.Tensor  # the packed latents' positions
    repeat_blocks: bool
    guidance_scale: float
    conditioning_scale: float


class XFluxControlNetPipeline(FluxControlNetPipeline):
    """`from_pretrained` as diffusers' pipeline; `sample` runs x-flux's loop."""

    @torch.inference_mode()
    def sample(
        self,
        prompts: Sequence[str],
        control_images: Sequence[Image.Image],
        *,
        width: int,
        height: int,
        seeds: Sequence[int],
        steps: int,
        guidance_scale: float,
        true_cfg_scale: float,
        cfg_start_step: int,
        conditioning_scale: float,
        negative_prompt: str = "",
        max_sequence_length: int = 512,
    ) -> list[Image.Image]:
        device, dtype = self._execution_device, self.transformer.dtype
        batch = len(prompts)
        positive = self.encode_prompt(list(prompts), None, device=device, max_sequence_length=max_sequence_length)
        negative = self.encode_prompt(
            [negative_prompt] * batch, None, device=device, max_sequence_length=max_sequence_length
        )
        latents, image_ids = self._initial_latents(seeds, batch, width, height)
        conditioning = _Conditioning(
            control=self._control_input(control_images, width, height),
            image_ids=image_ids,
            repeat_blocks=self.controlnet.input_hint_block is not None,  # XLabs' ControlNet; InstantX's has none
            guidance_scale=guidance_scale,
            conditioning_scale=conditioning_scale,
        )
        grid = schedule(steps, latents.shape[1])
        for step, (t_now, t_next) in enumerate(zip(grid[:-1], grid[1:], strict=True)):
            t = torch.full((batch,), t_now, device=device, dtype=dtype)
            prediction = self._velocity(latents, t, positive, conditioning)
            if step >= cfg_start_step and true_cfg_scale != 1.0:
                unwanted = self._velocity(latents, t, negative, conditioning)
                prediction = unwanted + true_cfg_scale * (prediction - unwanted)
            latents = latents + (t_next - t_now) * prediction
        return self._decoded(latents, width, height)

    def _initial_latents(
        self, seeds: Sequence[int], batch: int, width: int, height: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x-flux's starting noise: drawn from each item's own seed, so an image does not depend on its batch."""
        device, dtype = self._execution_device, self.transformer.dtype
        rows, cols = 2 * (height // (2 * self.vae_scale_factor)), 2 * (width // (2 * self.vae_scale_factor))
        channels = self.transformer.config.in_channels // 4
        noise = torch.cat(
            [
                torch.randn(
                    1,
                    channels,
                    rows,
                    cols,
                    device=device,
                    dtype=dtype,
                    generator=torch.Generator(device).manual_seed(seed),
                )
                for seed in seeds
            ]
        )
        latents = self._pack_latents(noise, batch, channels, rows, cols)
        return latents, self._prepare_latent_image_ids(batch, rows // 2, cols // 2, device, dtype)

    def _velocity(
        self,
        latents: torch.Tensor,
        t: torch.Tensor,
        text: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        conditioning: _Conditioning,
    ) -> torch.Tensor:
        """One text's velocity with its own ControlNet pass: x-flux reruns the ControlNet on the negative text."""
        embeds, pooled, text_ids = text
        guidance = torch.full(
            (len(t),), conditioning.guidance_scale, device=self._execution_device, dtype=torch.float32
        )
        blocks, single_blocks = self.controlnet(
            hidden_states=latents,
            controlnet_cond=conditioning.control,
            conditioning_scale=conditioning.conditioning_scale,
            timestep=t,
            guidance=guidance if self.controlnet.config.guidance_embeds else None,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            txt_ids=text_ids,
            img_ids=conditioning.image_ids,
            return_dict=False,
        )
        return self.transformer(
            hidden_states=latents,
            timestep=t,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            guidance=guidance if self.transformer.config.guidance_embeds else None,
            controlnet_block_samples=blocks,
            controlnet_single_block_samples=single_blocks,
            txt_ids=text_ids,
            img_ids=conditioning.image_ids,
            return_dict=False,
            controlnet_blocks_repeat=conditioning.repeat_blocks,
        )[0]

    def _decoded(self, latents: torch.Tensor, width: int, height: int) -> list[Image.Image]:
        """The images `sample` returns: the final latents unpacked, unscaled and decoded by the VAE."""
        unpacked = self._unpack_latents(latents, height, width, self.vae_scale_factor)
        decoded = self.vae.decode(
            unpacked / self.vae.config.scaling_factor + self.vae.config.shift_factor, return_dict=False
        )[0]
        return self.image_processor.postprocess(decoded, output_type="pil")

    def _control_input(self, images: Sequence[Image.Image], width: int, height: int) -> torch.Tensor:
        """Pixels in [-1, 1] for XLabs' ControlNet (x-flux's); for a ControlNet without a hint block (InstantX's,
        which x-flux cannot run), packed VAE latents at the distribution's mode, where diffusers draws a sample."""
        device = self._execution_device
        control = torch.cat(
            [self.prepare_image(image, width, height, 1, 1, device, self.vae.dtype) for image in images]
        )
        if self.controlnet.input_hint_block is not None:
            return control.to(self.transformer.dtype)
        latents = retrieve_latents(self.vae.encode(control), sample_mode="argmax")
        latents = (latents - self.vae.config.shift_factor) * self.vae.config.scaling_factor
        return self._pack_latents(latents, *latents.shape)
