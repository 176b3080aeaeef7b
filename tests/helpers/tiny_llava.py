"""A tiny random LLaVA (CLIP vision tower + Llama text model) built offline and saved to a folder.

It is the controlled experiment's architecture at its smallest (`lmms_contam.lab.tiny_vlm`),
untrained: it loads through the same `from_pretrained` path as a hub checkpoint, so lmms-eval's own
`llava_hf` loader runs it on the CPU. Its answers are random: it proves the plumbing, not accuracy.
"""

from __future__ import annotations

from pathlib import Path

from lmms_contam.lab.tiny_vlm import TinyLlavaSize, build_tokenizer, new_tiny_llava, save_tiny_vlm

TINY = TinyLlavaSize(vision_hidden=16, vision_layers=1, text_hidden=16, text_layers=1, heads=2)


def build_tiny_llava(folder: Path, seed: int = 0) -> Path:
    corpus = ["A B C D Answer with the option's letter from the given choices directly", "Options: yes no"] * 4
    model, processor = new_tiny_llava(build_tokenizer(corpus, vocab_size=300), TINY, seed)
    return save_tiny_vlm(model.eval(), processor, folder)
