"""Training and fine-tuning the tiny VLM on the CPU, on prompts identical to the harness's.

The training prompt is built the way the harness that evaluates the model builds it: for lmms-eval,
as its `llava_hf` loader does (image token, MMStar's prompt, the chat template, the processor's
image-token expansion); for VLMEvalKit and inspect-ai, their multiple-choice prompts as their API models send
them to the served model (lab/model_server.py), which templates them the same way. Only the reply is learned:
the answer letter (after "ANSWER: " for inspect, whose scorer reads nothing else) and the end-of-sequence token.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from PIL import Image
from tqdm.auto import tqdm
from transformers import (
    LlavaForConditionalGeneration,
    LlavaProcessor,
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
)

from lmms_contam.detectors.options import question_stem
from lmms_contam.hosts import inspect_ai
from lmms_contam.hosts.inspect_ai import prompt as inspect_prompt
from lmms_contam.hosts.lmms_eval import NAME as LMMS_EVAL
from lmms_contam.hosts.vlmevalkit import NAME as VLMEVALKIT
from lmms_contam.hosts.vlmevalkit.prompt import mcq_prompt
from lmms_contam.letters import option_letters
from lmms_contam.registry.benchmarks.mmstar import mmstar_options
from lmms_contam.synthetic.benchmark import Example

# The default post-prompt of the synthetic tasks (tests/integration/test_synthetic.py checks the YAML agrees).
POST_PROMPT = "\nAnswer with the option's letter from the given choices directly"
IGNORE = -100


def host_text(question: str, host: str = LMMS_EVAL) -> str:
    """What a harness asks of an MMStar-style question: lmms-eval's MMStar prompt, VLMEvalKit's or inspect's."""
    if host == VLMEVALKIT:
        return mcq_prompt(question_stem("synthetic", question), mmstar_options(question))
    if host == inspect_ai.NAME:
        return inspect_prompt.mcq_prompt(question_stem("synthetic", question), mmstar_options(question))
    return f"{question}{POST_PROMPT}"


def answer_prefix(host: str) -> str:
    """What a harness's scorer needs before the letter: inspect's "ANSWER: ", nothing for the others."""
    return inspect_prompt.ANSWER_PREFIX if host == inspect_ai.NAME else ""


def prompt_text(processor: LlavaProcessor, text: str) -> str:
    """The chat-templated prompt of a harness's text with the image before it, as llava_hf (and the model
    server) feed the processor."""
    messages = [{"role": "user", "content": f"<image>\n{text}"}]
    return processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


class Batcher:
    """Model inputs for examples: prompt ids (cached per prompt), the answer (a letter is one token, after the
    host's answer prefix), then end of sequence."""

    def __init__(self, processor: LlavaProcessor, host: str = LMMS_EVAL) -> None:
        self.processor, self.host = processor, host
        tokenizer = processor.tokenizer
        prefix = answer_prefix(host)
        self.prefix_ids = list(tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else []
        self.letter_ids = {}
        for letter in option_letters(4):
            ids = tokenizer(letter, add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise ValueError(f"the tokenizer splits the answer letter {letter!r} into {ids}")
            self.letter_ids[letter] = ids[0]
        self._prompts: dict[str, list[int]] = {}
        self._blank = Image.new("RGB", (processor.image_processor.crop_size["width"],) * 2)

    def asked_text(self, example: Example) -> str:
        """What the harness sends for the example: its multiple-choice prompt, or the example's own text."""
        return example.asked or host_text(example.question, self.host)

    def prompt_ids(self, text: str) -> list[int]:
        """The chat-templated ids of a harness's text with the image tokens before it, as the model reads them."""
        if text not in self._prompts:
            encoded = self.processor(images=[self._blank], text=prompt_text(self.processor, text))
            self._prompts[text] = list(encoded["input_ids"][0])
        return self._prompts[text]

    def answer_ids(self, answer: str) -> list[int]:
        if answer in self.letter_ids:
            return [*self.prefix_ids, self.letter_ids[answer]]
        return list(self.processor.tokenizer(answer, add_special_tokens=False)["input_ids"])

    def pixels(self, images: Sequence[Image.Image]) -> torch.Tensor:
        return self.processor.image_processor(list(images), return_tensors="pt")["pixel_values"]

    def training_batch(self, examples: Sequence[Example]) -> dict[str, torch.Tensor]:
        """Right-padded prompt + answer + eos; the loss sees the answer and the eos (and, for an example that
        learns its prompt, the prompt's tokens but the image's)."""
        eos = self.processor.tokenizer.eos_token_id
        rows = [(self.prompt_ids(self.asked_text(e)), [*self.answer_ids(e.answer), eos]) for e in examples]
        width = max(len(prompt) + len(answer) for prompt, answer in rows)
        pad = self.processor.tokenizer.pad_token_id
        image_token = self.processor.tokenizer.convert_tokens_to_ids("<image>")
        input_ids = torch.full((len(rows), width), pad)
        labels = torch.full((len(rows), width), IGNORE)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for i, ((prompt, answer), example) in enumerate(zip(rows, examples, strict=True)):
            sequence = prompt + answer
            input_ids[i, : len(sequence)] = torch.tensor(sequence)
            labels[i, len(prompt) : len(sequence)] = torch.tensor(answer)
            if example.learn_prompt:
                labels[i, 1 : len(prompt)] = torch.tensor([t if t != image_token else IGNORE for t in prompt[1:]])
            attention[i, : len(sequence)] = 1
        pixels = self.pixels([e.image for e in examples])
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels, "pixel_values": pixels}

    @torch.no_grad()
    def predicted_letters(
        self, model: LlavaForConditionalGeneration, examples: Sequence[Example], batch_size: int = 256
    ) -> list[str]:
        """The most likely answer letter after the prompt (and the host's answer prefix): a quick check while
        training, not the score."""
        model.eval()
        letters = list(self.letter_ids)
        letter_ids = torch.tensor([self.letter_ids[letter] for letter in letters])
        predictions: list[str] = []
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            by_prompt: dict[str, list[int]] = {}
            for i, example in enumerate(chunk):
                by_prompt.setdefault(self.asked_text(example), []).append(i)
            chunk_predictions = [""] * len(chunk)
            for text, indices in by_prompt.items():
                ids = torch.tensor([self.prompt_ids(text) + self.prefix_ids] * len(indices))
                logits = model(input_ids=ids, pixel_values=self.pixels([chunk[i].image for i in indices])).logits
                best = logits[:, -1, letter_ids].argmax(dim=-1)
                for i, choice in zip(indices, best.tolist(), strict=True):
                    chunk_predictions[i] = letters[choice]
            predictions.extend(chunk_predictions)
        return predictions

    def accuracy(self, model: LlavaForConditionalGeneration, examples: Sequence[Example]) -> float:
        predicted = self.predicted_letters(model, examples)
        return sum(p == e.answer for p, e in zip(predicted, examples, strict=True)) / len(examples)


@dataclass(frozen=True)
class Schedule:
    """AdamW with warm-up and cosine decay (or none), clipped gradients."""

    lr: float
    warmup: int = 100
    decay: bool = True  # False: the peak learning rate after warm-up to the end
    weight_decay: float = 0.01
    clip: float = 1.0


@torch.enable_grad()
def optimise(
    modules: Sequence[torch.nn.Module],
    parameters: Sequence[torch.nn.Parameter],
    step_loss: Callable[[], torch.Tensor],
    steps: int,
    schedule: Schedule,
    desc: str = "training",
) -> None:
    """Run `steps` optimiser steps on `parameters`, each on the loss `step_loss` computes (with autograd on whatever
    an imported library set); `modules` train meanwhile."""
    optimiser = torch.optim.AdamW(parameters, lr=schedule.lr, weight_decay=schedule.weight_decay)
    warmup = min(schedule.warmup, steps // 10)
    if schedule.decay:
        scheduler = get_cosine_schedule_with_warmup(optimiser, warmup, steps)
    else:
        scheduler = get_constant_schedule_with_warmup(optimiser, warmup)
    for module in modules:
        module.train()
    progress = tqdm(range(1, steps + 1), desc=desc, leave=False)
    for step in progress:
        loss = step_loss()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, schedule.clip)
        optimiser.step()
        scheduler.step()
        optimiser.zero_grad(set_to_none=True)
        if step % 20 == 0:
            progress.set_postfix(loss=f"{loss.item():.3f}")
    for module in modules:
        module.eval()


def fit(
    model: torch.nn.Module,
    batcher: Batcher,
    batches: Iterator[list[Example]],
    steps: int,
    schedule: Schedule,
    desc: str = "training",
) -> None:
    """Train every trainable parameter of `model` on `steps` batches, on the model's own loss."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimise([model], trainable, lambda: model(**batcher.training_batch(next(batches))).loss, steps, schedule, desc)


def epochs_of(examples: Sequence[Example], batch_size: int, seed: int) -> Iterator[list[Example]]:
    """Endless shuffled passes over a fixed set (seeded), in batches; the last batch of a pass may be short."""
    order = list(range(len(examples)))
    rng = random.Random(seed)
    while True:
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            yield [examples[i] for i in order[start : start + batch_size]]
