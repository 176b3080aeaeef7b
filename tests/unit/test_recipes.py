"""Perturbation recipes: a variant names its base recipe and states only what it changes."""

from __future__ import annotations

import pytest
from helpers.paths import PACKAGE_CONFIGS

from lmms_contam.perturb.config import PerturbConfig

RECIPES = PACKAGE_CONFIGS / "perturb"


def _without(resolved: dict, section: str, keys: set[str]) -> dict:
    return {**resolved, section: {k: v for k, v in resolved[section].items() if k not in keys}}


def test_the_kontext_recipe_is_the_papers_with_another_generator():
    canny = PerturbConfig.from_yaml(RECIPES / "flux_canny.yaml").resolved()
    kontext = PerturbConfig.from_yaml(RECIPES / "flux_kontext.yaml").resolved()
    changed = {"backend", "base_model", "steps", "guidance_scale"}
    assert _without(kontext, "generate", changed) == _without(canny, "generate", changed)
    assert (kontext["generate"]["backend"], kontext["generate"]["steps"]) == ("kontext", 28)


def test_the_paper_recipe_is_xflux_and_flux_canny_is_diffusers_with_the_same_numbers():
    paper = PerturbConfig.from_yaml(RECIPES / "paper.yaml")
    canny = PerturbConfig.from_yaml(RECIPES / "flux_canny.yaml")
    how = {"sampler", "cfg_start_step", "edge_map", "size_rounding", "seed"}
    assert _without(paper.resolved(), "generate", how) == _without(canny.resolved(), "generate", how)
    assert {k: v for k, v in paper.resolved()["generate"].items() if k in how} == {
        "sampler": "xflux",
        "cfg_start_step": 5,
        "edge_map": "xflux",
        "size_rounding": "down",
        "seed": 123456789,
    }
    assert (canny.generate.sampler, canny.generate.seed, canny.generate.size_rounding) == ("diffusers", None, "nearest")
    numbers = (paper.generate.steps, paper.generate.guidance_scale, paper.generate.true_cfg_scale,
               paper.generate.conditioning_scale, paper.generate.canny_low, paper.generate.canny_high)  # fmt: skip
    assert numbers == (25, 4.0, 3.5, 0.8, 100, 200)


def test_a_variant_elsewhere_keeps_its_bases_templates(tmp_path):
    variant = tmp_path / "local-judge.yaml"
    variant.write_text(f"base: {RECIPES / 'flux_canny.yaml'}\nverify:\n  judge:\n    endpoint: {{model: qwen2-vl}}\n")
    base = PerturbConfig.from_yaml(RECIPES / "flux_canny.yaml")
    ours = PerturbConfig.from_yaml(variant)
    assert ours.judge_endpoint.model == "qwen2-vl"
    assert ours.judge_endpoint.api_key_env == base.judge_endpoint.api_key_env  # merged key by key
    assert ours.judge == base.judge and ours.caption == base.caption  # the templates next to the base


def test_a_loop_of_bases_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ValueError, match="a.yaml: invalid perturbation config.*loop"):
        PerturbConfig.from_yaml(tmp_path / "a.yaml")
