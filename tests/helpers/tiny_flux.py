"""Tiny random Flux pipelines (ControlNet and Kontext) built offline and saved like hub checkpoints.

They load through the same `from_pretrained` calls that real model ids use; their images are noise.
"""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import (
    AutoencoderKL,
    FlowMatchEulerDiscreteScheduler,
    FluxControlNetModel,
    FluxControlNetPipeline,
    FluxKontextPipeline,
    FluxTransformer2DModel,
)
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    CLIPTextConfig,
    CLIPTextModel,
    CLIPTokenizer,
    PreTrainedTokenizerFast,
    T5Config,
    T5EncoderModel,
)

FLUX_DIMS = {"num_layers": 1, "num_single_layers": 1, "attention_head_dim": 16, "num_attention_heads": 2,
             "joint_attention_dim": 32, "pooled_projection_dim": 32, "axes_dims_rope": (4, 6, 6)}  # fmt: skip


def _clip_tokenizer() -> CLIPTokenizer:
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for piece in letters + [f"{c}</w>" for c in letters]:
        vocab[piece] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[], pad_token="<|endoftext|>", model_max_length=77)


def _t5_tokenizer() -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(["a photo of two cats on a sofa"], trainers.BpeTrainer(
        vocab_size=64, special_tokens=["<pad>", "</s>", "<unk>"], show_progress=False))  # fmt: skip
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=512
    )


def _components(seed: int, vae_blocks: int = 2) -> dict:
    torch.manual_seed(seed)
    return {
        "scheduler": FlowMatchEulerDiscreteScheduler(),
        "vae": AutoencoderKL(
            in_channels=3,
            out_channels=3,
            down_block_types=("DownEncoderBlock2D",) * vae_blocks,
            up_block_types=("UpDecoderBlock2D",) * vae_blocks,
            block_out_channels=(8, 16, 16, 16)[:vae_blocks],
            layers_per_block=1,
            latent_channels=4,
            norm_num_groups=4,
            sample_size=32,
            use_quant_conv=False,
            use_post_quant_conv=False,
            shift_factor=0.0609,
            scaling_factor=1.5035,
        ),  # fmt: skip
        "text_encoder": CLIPTextModel(
            CLIPTextConfig(
                hidden_size=32,
                intermediate_size=37,
                num_hidden_layers=2,
                num_attention_heads=4,
                vocab_size=64,
                projection_dim=32,
                max_position_embeddings=77,
                bos_token_id=0,
                eos_token_id=1,
                pad_token_id=1,
            )
        ),  # fmt: skip
        "tokenizer": _clip_tokenizer(),
        "text_encoder_2": T5EncoderModel(
            T5Config(d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=4, vocab_size=64)
        ),  # fmt: skip
        "tokenizer_2": _t5_tokenizer(),
        "transformer": FluxTransformer2DModel(in_channels=16, guidance_embeds=True, **FLUX_DIMS),
    }


def build_tiny_flux_controlnet(folder: Path, seed: int = 0, xlabs: bool = False) -> tuple[Path, Path]:
    """(base pipeline folder, controlnet folder), as `FluxControlNetPipeline.from_pretrained` expects.

    `xlabs`: a ControlNet with XLabs' pixel-space hint block (the paper's kind) over a VAE that downsamples
    8 times, as the real one; otherwise one that reads VAE latents, as InstantX's."""
    components = _components(seed, vae_blocks=4 if xlabs else 2)
    hint = {"conditioning_embedding_channels": 4, "patch_size": 2} if xlabs else {}
    controlnet = FluxControlNetModel(in_channels=16, guidance_embeds=True, **hint, **FLUX_DIMS)
    pipe = FluxControlNetPipeline(**components, controlnet=controlnet)
    prefix = "xlabs-" if xlabs else ""
    pipe.save_pretrained(folder / f"{prefix}base")
    controlnet.save_pretrained(folder / f"{prefix}controlnet")
    return folder / f"{prefix}base", folder / f"{prefix}controlnet"


def build_tiny_flux_kontext(folder: Path, seed: int = 0) -> Path:
    FluxKontextPipeline(**_components(seed)).save_pretrained(folder / "kontext")
    return folder / "kontext"


def install_in_hub_cache(folder: Path, repo_id: str) -> str:
    """Copy a saved model into the hub cache ($HF_HOME/hub) as repo `repo_id` at a commit, the layout a
    download leaves, so `from_pretrained(repo_id)` resolves it offline as it would a real model id."""
    import hashlib
    import os
    import shutil

    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo = Path(os.environ["HF_HOME"]) / "hub" / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / commit, dirs_exist_ok=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return commit
