"""Named embedders as data: `configs/embedders/<name>.yaml` says which family builds one, its model and
weights, and the threshold its cosines are read at.

The threshold belongs to the embedder, not to the scan: cosines of different models live on different
scales (CLIP's 0.9 means nothing for ImageNet features), so a family the package does not know is an
error, never a default threshold. Preprocessing comes with the weights (open_clip's transform, the CLIP
processor's settings) and is recorded in every embedding file's recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lmms_contam.corpus.embed import (
    EfficientNetLite0Embedder,
    Embedder,
    HFClipEmbedder,
    OpenClipEmbedder,
    PixelEmbedder,
)

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "embedders"
CLIP_THRESHOLD = 0.9  # the paper's: a CLIP cosine above 0.9 counts as the same image, whichever CLIP model


@dataclass(frozen=True)
class EmbedderConfig:
    name: str
    family: str
    threshold: float
    model: str | None = None
    weights: str | None = None
    options: dict = field(default_factory=dict)  # keyword arguments of the family's embedder (dtype, size, ...)
    about: str = ""

    def build(self, device: str = "cpu") -> Embedder:
        return FAMILIES[self.family].build(self, device)


@dataclass(frozen=True)
class Family:
    build: Callable[[EmbedderConfig, str], Embedder]
    takes_model: bool
    options: tuple[str, ...]  # the keyword arguments a config may set


FAMILIES = {
    "open_clip": Family(
        lambda c, device: OpenClipEmbedder(c.model, c.weights, device=device, **c.options),
        True,
        ("batch_size", "dtype"),
    ),
    "hf_clip": Family(
        lambda c, device: HFClipEmbedder(c.model, device=device, **c.options),
        True,
        ("batch_size", "dtype", "trust_remote_code"),
    ),
    "efficientnet_lite0": Family(
        lambda c, device: EfficientNetLite0Embedder(device=device, **c.options), False, ("batch_size", "dtype")
    ),
    "pixels": Family(lambda c, _device: PixelEmbedder(**c.options), False, ("size", "dtype")),
}
FIELDS = {"about", "family", "model", "weights", "threshold", "options"}


def read_embedder_config(path: Path) -> EmbedderConfig:
    """One config file, every field checked: the error names the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not a readable embedder config ({exc})") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: an embedder config is a mapping of {sorted(FIELDS)}")
    if unknown := set(raw) - FIELDS:
        raise ValueError(f"{path}: unknown field(s) {sorted(unknown)}; an embedder config has {sorted(FIELDS)}")
    family = FAMILIES.get(raw.get("family"))
    if family is None:
        raise ValueError(f"{path}: family {raw.get('family')!r} is not one of {sorted(FAMILIES)}")
    threshold = raw.get("threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not -1 <= threshold <= 1:
        raise ValueError(f"{path}: threshold must be a cosine between -1 and 1, got {threshold!r}")
    if family.takes_model != ("model" in raw):
        need = "needs a model" if family.takes_model else "has a fixed model; remove model"
        raise ValueError(f"{path}: family {raw['family']} {need}")
    options = raw.get("options", {})
    if not isinstance(options, dict) or set(options) - set(family.options):
        raise ValueError(
            f"{path}: options of family {raw['family']} are a mapping of {list(family.options)}, got {options!r}"
        )
    return EmbedderConfig(
        name=path.stem,
        family=raw["family"],
        threshold=float(threshold),
        model=raw.get("model"),
        weights=raw.get("weights"),
        options=options,
        about=raw.get("about", ""),
    )


def named_embedders() -> list[EmbedderConfig]:
    return [read_embedder_config(path) for path in sorted(CONFIGS.glob("*.yaml"))]


def embedder_config(spec: str) -> EmbedderConfig:
    """A name in configs/embedders/, a config file of one's own, or an inline CLIP spec
    (open_clip:MODEL/PRETRAINED, hf_clip:MODEL_ID_OR_FOLDER) read at the paper's 0.9."""
    if spec.endswith((".yaml", ".yml")):
        return read_embedder_config(Path(spec))
    if "/" not in spec and ":" not in spec and (CONFIGS / f"{spec}.yaml").is_file():
        return read_embedder_config(CONFIGS / f"{spec}.yaml")
    family, inline, rest = spec.partition(":")
    if inline and family == "open_clip" and rest:
        model, _, weights = rest.partition("/")
        return EmbedderConfig(name=spec, family=family, threshold=CLIP_THRESHOLD, model=model, weights=weights or None)
    if inline and family == "hf_clip" and rest:
        return EmbedderConfig(name=spec, family=family, threshold=CLIP_THRESHOLD, model=rest)
    names = ", ".join(config.name for config in named_embedders())
    raise ValueError(
        f"unknown embedder {spec!r}: use a name ({names}; `lmms-contam embedders` lists them), a "
        "config file (.yaml), open_clip:MODEL/PRETRAINED or hf_clip:MODEL_ID_OR_FOLDER"
    )
