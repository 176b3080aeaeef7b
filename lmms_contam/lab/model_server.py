"""The experiment's trained models served as an OpenAI-compatible endpoint on 127.0.0.1, so that VLMEvalKit and
inspect-ai ask them with their own API models, prompts and answer matching, as they ask any hosted model.

A request names the model it asks; its text is templated as the model was trained to read it (the
chat template, the image token first) and its answer is decoded greedily, as lmms-eval's `llava_hf`
loader decodes. VLMEvalKit's `--local-media` sends the path of the image it wrote, so the model sees
the set's own pixels, not a JPEG of them.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from lmms_contam.lab import tiny_vlm, train
from lmms_contam.lab.chat_endpoint import ChatEndpoint, request_parts

MAX_NEW_TOKENS = 8  # "ANSWER: " (inspect), a letter, then the end of the sequence


class ServedModels(ChatEndpoint):
    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders
        self._loaded: dict[str, tuple] = {}
        self._lock = threading.Lock()  # one forward at a time: the CPU is shared
        super().__init__(self.reply, "lmms-contam-synthetic")

    @torch.no_grad()
    def reply(self, body: dict) -> str:
        name = str(body.get("model"))
        if name not in self.folders:
            raise KeyError(f"no model {name!r} here; served: {', '.join(self.folders)}")
        text, images = request_parts(body)
        if len(images) != 1:
            raise ValueError(f"one image per question, got {len(images)}")
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = tiny_vlm.load_tiny_vlm(self.folders[name])
            vlm, processor = self._loaded[name]
            inputs = processor(
                images=[images[0].convert("RGB")], text=train.prompt_text(processor, text), return_tensors="pt"
            )
            output = vlm.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
        return processor.tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip()
