"""The perturbation recipe as one typed object, read from a YAML file in configs/perturb/."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from lmms_contam.llm import EndpointConfig
from lmms_contam.perturb.caption import CaptionSettings
from lmms_contam.perturb.edit import FluxSettings
from lmms_contam.perturb.verify import CounterfactualJudgeSettings, DriftSettings


@dataclass(frozen=True)
class PerturbConfig:
    seed: int
    caption_endpoint: EndpointConfig
    caption: CaptionSettings
    generate: FluxSettings
    judge_endpoint: EndpointConfig | None
    judge: CounterfactualJudgeSettings | None
    drift: DriftSettings

    @classmethod
    def from_yaml(cls, path: str | Path) -> PerturbConfig:
        path = Path(path)
        try:
            raw = read_recipe(path)
            caption, verify = dict(raw["caption"]), dict(raw.get("verify") or {})
            judge = dict(verify["judge"]) if verify.get("judge") else None
            return cls(
                seed=int(raw.get("seed", 0)),
                caption_endpoint=EndpointConfig.from_dict(caption.pop("endpoint")),
                caption=CaptionSettings.from_file(path.parent / caption.pop("template"), **caption),
                generate=FluxSettings(**raw.get("generate", {})),
                judge_endpoint=EndpointConfig.from_dict(judge.pop("endpoint")) if judge else None,
                judge=None
                if judge is None
                else CounterfactualJudgeSettings.from_file(path.parent / judge.pop("template"), **judge),
                drift=DriftSettings(**(verify.get("drift") or {})),
            )
        except (KeyError, TypeError, ValueError, yaml.YAMLError, OSError) as exc:
            raise ValueError(f"{path}: invalid perturbation config ({type(exc).__name__}: {exc})") from exc

    def resolved(self) -> dict:
        """Everything that decides the output, for the manifest (templates by hash, keys by variable name)."""
        return {
            "seed": self.seed,
            "caption": {"endpoint": self.caption_endpoint.as_dict(), **self.caption.described()},
            "generate": asdict(self.generate),
            "judge": None
            if self.judge is None
            else {"endpoint": self.judge_endpoint.as_dict(), **self.judge.described()},
            "drift": asdict(self.drift),
        }


def read_recipe(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """A recipe file as one mapping: the recipe named by its `base:` (relative to it), overridden key by key
    by its own settings, so a variant states only what it changes. Templates resolve next to the file
    that names them."""
    path = path.resolve()
    if path in chain:
        raise ValueError(f"`base:` recipes form a loop: {' -> '.join(str(p) for p in (*chain, path))}")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    for section in (raw.get("caption"), (raw.get("verify") or {}).get("judge")):
        if isinstance(section, dict) and section.get("template"):
            section["template"] = str(path.parent / section["template"])
    base = raw.pop("base", None)
    return _overridden(read_recipe(path.parent / base, (*chain, path)), raw) if base else raw


def _overridden(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        both = isinstance(value, dict) and isinstance(base.get(key), dict)
        merged[key] = _overridden(base[key], value) if both else value
    return merged
