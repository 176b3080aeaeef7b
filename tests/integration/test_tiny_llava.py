"""The plugin with a real model loader, and installed from its wheel into a fresh environment."""

from __future__ import annotations

import math

import pytest
from helpers.harness import metric, run_lmms_eval
from helpers.tiny_llava import build_tiny_llava

from lmms_contam.hosts.lmms_eval.scoring import PAIRED_METRICS


def test_tiny_llava_through_lmms_eval_llava_hf_loader(with_sets, tmp_path):
    model = build_tiny_llava(tmp_path / "tiny-llava")
    run = run_lmms_eval(
        ["--model", "llava_hf", "--model_args", f"pretrained={model},device=cpu,device_map=cpu,dtype=float32",
         "--gen_kwargs", "max_new_tokens=4", "--tasks", "mmstar_contam,mmstar_text_only"],
        tmp_path / "out",
    )  # fmt: skip
    # lmms-eval's default llava_hf loader (chat) cannot take a prompt without an image: the canvas by default
    assert {s["contam_ids"]["text_only_input"] for s in run.samples["mmstar_text_only"]} == {"blank"}
    values = {m.name: metric(run, "mmstar_contam", m.name) for m in PAIRED_METRICS}
    assert all(math.isfinite(value) for value in values.values()), values
    # The statistics agree with each other: accuracies in [0, 1], delta their difference and inside its
    # interval, McNemar's p a probability.
    assert 0 <= values["acc_original"] <= 1 and 0 <= values["acc_perturbed"] <= 1
    assert values["delta"] == pytest.approx(values["acc_perturbed"] - values["acc_original"])
    assert values["delta_ci_low"] <= values["delta"] <= values["delta_ci_high"]
    assert 0 < values["mcnemar_p"] <= 1 and values["n_flagged"] <= values["n_pairs"] == 12
    assert len(run.samples["mmstar_contam"]) == 24
    assert all(isinstance(s["filtered_resps"], str) for s in run.samples["mmstar_contam"])


def test_text_only_without_an_image_through_the_simple_llava_hf_loader(with_sets, tmp_path, monkeypatch):
    """MMStar's text-only mode: no image at all, for a loader that takes a prompt without one."""
    monkeypatch.setenv("LMMS_CONTAM_TEXT_ONLY_IMAGE", "none")
    model = build_tiny_llava(tmp_path / "tiny-llava")
    run = run_lmms_eval(
        ["--model", "llava_hf", "--force_simple", "--model_args",
         f"pretrained={model},device=cpu,device_map=cpu,dtype=float32", "--gen_kwargs", "max_new_tokens=4",
         "--tasks", "mmstar_text_only"],
        tmp_path / "out",
    )  # fmt: skip
    samples = run.samples.get("mmstar_text_only")
    assert samples and len(samples) == 12, run.output[-3000:]
    assert {s["contam_ids"]["text_only_input"] for s in samples} == {"none"}
    assert 0 <= metric(run, "mmstar_text_only", "acc_text_only") <= 1
