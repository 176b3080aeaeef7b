"""A tiny LLaVA (CLIP vision tower + Llama text model) that lmms-eval's `llava_hf` loader runs as is.

It is a real transformers `LlavaForConditionalGeneration` with a processor, a chat template and a
BPE tokenizer trained in memory on the prompts it will see, saved with `save_pretrained`: nothing
is downloaded, and the harness loads it exactly as it loads a hub checkpoint.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PreTrainedTokenizerFast,
)

# "user: <image>\n...\nassistant: ": plain role prefixes, so the prompt stays a few dozen tokens.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]


@dataclass(frozen=True)
class TinyLlavaSize:
    """About 1.1 M parameters by default: trains on 2 CPU cores in about a minute."""

    vision_hidden: int = 128
    vision_layers: int = 2
    text_hidden: int = 128
    text_layers: int = 4
    heads: int = 4
    image_size: int = 32
    patch_size: int = 16  # 32 / 16: four image tokens, one per scene cell
    max_positions: int = 512


def build_tokenizer(
    corpus: Iterable[str], vocab_size: int = 1000, breaks: str | None = None
) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the texts the model will read; every byte stays encodable.

    Merges may cross spaces, so a recurring phrase becomes one token: prompts shrink from about 50
    tokens to about 15, which makes training and evaluation on the CPU three times faster. Text matching
    the regex `breaks` is a piece of its own that no merge crosses: the race's model reads each option
    as one token, "A: red", where merges across options made ", C: pink, D: " one token.
    """
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bytes_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if breaks is None:
        bpe.pre_tokenizer = bytes_level
    else:
        bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(breaks), "isolated"), bytes_level])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(corpus), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
        chat_template=CHAT_TEMPLATE,
    )


def new_tiny_llava(
    tokenizer: PreTrainedTokenizerFast, size: TinyLlavaSize = TinyLlavaSize(), seed: int = 0
) -> tuple[LlavaForConditionalGeneration, LlavaProcessor]:
    """A randomly initialised model and its processor (the CLS token is dropped: one token per patch)."""
    torch.manual_seed(seed)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=size.vision_hidden,
            intermediate_size=2 * size.vision_hidden,
            num_hidden_layers=size.vision_layers,
            num_attention_heads=size.heads,
            image_size=size.image_size,
            patch_size=size.patch_size,
        ),
        text_config=LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=size.text_hidden,
            intermediate_size=2 * size.text_hidden,
            num_hidden_layers=size.text_layers,
            num_attention_heads=size.heads,
            num_key_value_heads=size.heads,
            max_position_embeddings=size.max_positions,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        ),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    model = LlavaForConditionalGeneration(config)
    edge = size.image_size
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": edge}, crop_size={"height": edge, "width": edge}),
        tokenizer=tokenizer,
        patch_size=size.patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )
    return model, processor


def save_tiny_vlm(model: LlavaForConditionalGeneration, processor: LlavaProcessor, folder: str | Path) -> Path:
    """Write beside the target, then rename: a crash never leaves a folder that looks like a model."""
    folder = Path(folder)
    partial = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    processor.save_pretrained(partial)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def load_tiny_vlm(folder: str | Path) -> tuple[LlavaForConditionalGeneration, LlavaProcessor]:
    return LlavaForConditionalGeneration.from_pretrained(folder), LlavaProcessor.from_pretrained(folder)
