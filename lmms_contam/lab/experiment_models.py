"""The experiment's models: a clean one trained from scratch, then contaminated and control copies.

Each model is a `save_pretrained` folder that lmms-eval's `llava_hf` loader reads (and the model server
serves to VLMEvalKit), trained on the prompt of the harness that evaluates it. A folder that exists is
finished (folders appear by rename), so a rerun after a crash trains only what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from loguru import logger

from lmms_contam.hosts.lmms_eval import NAME as LMMS_EVAL
from lmms_contam.lab import tiny_vlm, train
from lmms_contam.stats import stable_seed
from lmms_contam.synthetic import benchmark
from lmms_contam.synthetic.scenes import KINDS, draw_scene


@dataclass(frozen=True)
class TrainingRecipe:
    """Every training setting, fixed before the experiment runs (no tuning on its p-values; README)."""

    test_items: int = 1000
    clean_steps: int = 400
    clean_lr: float = 1e-3
    clean_batch: int = 64
    degrees: tuple[int, ...] = (10, 20, 30)  # fine-tuning epochs on the test items, lowest to highest
    # 2: each degree its own fine-tuning run; 1: snapshots of one 30-epoch run. Recorded with the models, so
    # a folder of version-1 models is refused rather than mixed.
    version: int = 2
    finetune_batch: int = 16
    full_lr: float = 1e-3
    lora_lr: float = 1.5e-3
    lora_rank: int = 32


@dataclass(frozen=True)
class ModelSpec:
    name: str
    strategy: str  # "clean", "full", "lora" or "control"
    degree: int  # fine-tuning epochs (0 for the clean model)
    seed: int

    def folder(self, root: Path) -> Path:
        return root / f"seed{self.seed}" / self.name


def plan(
    recipe: TrainingRecipe,
    seed: int,
    strategies: tuple[str, ...] = ("full", "lora"),
    control: bool = True,
    degrees: tuple[int, ...] | None = None,
) -> list[ModelSpec]:
    """Clean, each strategy at each degree, and the control at the highest degree."""
    degrees = degrees or recipe.degrees
    specs = [ModelSpec(name="clean", strategy="clean", degree=0, seed=seed)]
    specs += [ModelSpec(name=f"{s}-e{d}", strategy=s, degree=d, seed=seed) for s in strategies for d in degrees]
    if control:
        specs.append(ModelSpec(name=f"control-e{max(degrees)}", strategy="control", degree=max(degrees), seed=seed))
    return specs


def _tokenizer_corpus(host: str) -> list[str]:
    """Every prompt the model will read, templated as the harness templates it, plus the answers."""
    _, bootstrap = tiny_vlm.new_tiny_llava(tiny_vlm.build_tokenizer(["A B C D"]))
    questions = [draw_scene("vocabulary", 0, kind).question_text() for kind in sorted(KINDS)]
    prompts = [train.prompt_text(bootstrap, train.host_text(q, host)) for q in questions]
    return prompts * 4 + [f"{train.answer_prefix(host)}{letter}" for letter in "ABCD"]


def train_clean(spec: ModelSpec, recipe: TrainingRecipe, root: Path, host: str = LMMS_EVAL) -> Path:
    folder = spec.folder(root)
    if folder.exists():
        return folder
    vlm, processor = tiny_vlm.new_tiny_llava(tiny_vlm.build_tokenizer(_tokenizer_corpus(host)), seed=spec.seed)
    batcher = train.Batcher(processor, host)
    schedule = train.Schedule(lr=recipe.clean_lr)
    train.fit(
        vlm,
        batcher,
        benchmark.training_batches(spec.seed, recipe.clean_batch),
        recipe.clean_steps,
        schedule,
        desc=f"seed {spec.seed}: clean model",
    )
    return tiny_vlm.save_tiny_vlm(vlm, processor, folder)


def _with_lora(vlm, rank: int):
    try:
        from peft import LoraConfig, get_peft_model
    except ModuleNotFoundError as exc:  # the product installs without it
        raise ValueError(
            "the LoRA models need peft, in the experiments extra: pip install 'lmms-contam[experiments]'"
        ) from exc

    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules="all-linear", lora_dropout=0.0)
    return get_peft_model(vlm, config)


def fine_tune(
    specs: list[ModelSpec], recipe: TrainingRecipe, root: Path, clean: Path, host: str = LMMS_EVAL
) -> list[Path]:
    """One complete run per degree, each from the clean model with its own warm-up and cosine decay to
    zero over its epochs, as "fine-tuned for N epochs" means in the paper (a mid-run snapshot of a longer
    run would be caught at a high learning rate, not annealed)."""
    for spec in specs:
        folder = spec.folder(root)
        if not folder.exists():
            _fine_tune_one(spec, recipe, clean, folder, host)
    return [spec.folder(root) for spec in specs]


def _fine_tune_one(spec: ModelSpec, recipe: TrainingRecipe, clean: Path, folder: Path, host: str) -> None:
    # The same LoRA initialisation and batch order for every degree: a higher degree only trains longer.
    torch.manual_seed(stable_seed("fine-tune", spec.strategy, str(spec.seed)))
    vlm, processor = tiny_vlm.load_tiny_vlm(clean)
    if spec.strategy == "lora":
        vlm = _with_lora(vlm, recipe.lora_rank)
    data = (
        benchmark.control_examples(recipe.test_items, spec.seed)
        if spec.strategy == "control"
        else benchmark.original_examples(recipe.test_items)
    )
    steps = spec.degree * -(-len(data) // recipe.finetune_batch)
    lr = recipe.lora_lr if spec.strategy == "lora" else recipe.full_lr
    train.fit(
        vlm,
        train.Batcher(processor, host),
        train.epochs_of(data, recipe.finetune_batch, spec.seed),
        steps,
        train.Schedule(lr=lr, warmup=20),
        desc=f"seed {spec.seed}: {spec.name}",
    )
    _save(vlm, processor, folder, spec.strategy)


def _save(vlm, processor, folder: Path, strategy: str) -> None:
    """LoRA models keep their adapter and are saved merged, the form a harness loader reads."""
    if strategy == "lora":
        vlm.save_pretrained(folder.with_name(f"{folder.name}.adapter"))
        merged = _merged_copy(vlm)
        tiny_vlm.save_tiny_vlm(merged, processor, folder)
    else:
        tiny_vlm.save_tiny_vlm(vlm, processor, folder)
    logger.info(f"saved {folder}")


def _merged_copy(peft_model):
    import copy

    return copy.deepcopy(peft_model).merge_and_unload()


def build_models(specs: list[ModelSpec], recipe: TrainingRecipe, root: Path, host: str = LMMS_EVAL) -> dict[str, Path]:
    """Train what is missing, on the prompt of the harness `host`; returns {model name: folder}."""
    (clean_spec,) = [s for s in specs if s.strategy == "clean"]
    clean = train_clean(clean_spec, recipe, root, host)
    for strategy in dict.fromkeys(s.strategy for s in specs if s.strategy != "clean"):
        fine_tune([s for s in specs if s.strategy == strategy], recipe, root, clean, host)
    return {spec.name: spec.folder(root) for spec in specs}
