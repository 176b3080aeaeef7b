"""Named embedders are data files; a scan counts at the threshold of the embedder it ran with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.fixtures import real_photos

from lmms_contam.cli import main
from lmms_contam.corpus.embedder_configs import embedder_config


def test_the_named_embedders_are_listed_with_their_thresholds(capsys):
    assert main(["embedders"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if "threshold" in line}
    assert set(listed) == {"clip-vit-l-14", "hf-clip-vit-l-14", "efficientnet-lite0", "pixels"}
    paper = embedder_config("clip-vit-l-14")
    assert (paper.family, paper.model, paper.weights, paper.threshold) == ("open_clip", "ViT-L-14", "openai", 0.9)
    assert "threshold 0.9 " in listed["clip-vit-l-14"] and "threshold 0.5 " in listed["efficientnet-lite0"]
    inline = embedder_config("open_clip:ViT-B-32/laion2b_s34b_b79k")  # any CLIP model, read at the paper's 0.9
    assert (inline.model, inline.weights, inline.threshold) == ("ViT-B-32", "laion2b_s34b_b79k", 0.9)


def _write_images(folder: Path, photos: list[bytes]) -> Path:
    folder.mkdir(parents=True)
    for number, data in enumerate(photos):
        (folder / f"photo{number}.png").write_bytes(data)
    return folder


def test_a_scan_counts_at_its_embedders_threshold_unless_told_otherwise(tmp_path, capsys):
    """A config of one's own (pixels at 16x16, read at 0.98): two of four eval photos are in the corpus."""
    config = tmp_path / "tiny-pixels.yaml"
    config.write_text("family: pixels\nthreshold: 0.98\noptions: {size: 16}\n")
    photos = real_photos(size=64)
    evals = _write_images(tmp_path / "eval", photos[:4])
    corpus_images = _write_images(tmp_path / "corpus-images", [photos[0], photos[2], *photos[4:8]])
    assert main(["embed-corpus", str(corpus_images), "--out", str(tmp_path / "corpus"), "--embedder", str(config)]) == 0
    scan = ["scan", "--eval-folder", str(evals), "--corpus", str(tmp_path / "corpus"), "--embedder", str(config)]
    assert main([*scan, "--out", str(tmp_path / "standard")]) == 0
    assert main([*scan, "--out", str(tmp_path / "told"), "--threshold", "-1"]) == 0
    standard = json.loads((tmp_path / "standard" / "eval.summary.json").read_text())
    told = json.loads((tmp_path / "told" / "eval.summary.json").read_text())
    assert (standard["threshold"], standard["image_only_rate"]) == (0.98, 0.5)
    assert (told["threshold"], told["image_only_rate"]) == (-1.0, 1.0)
    assert standard["recipe"]["model"] == "RGB pixels 16x16"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("family: clip_v9\nthreshold: 0.9\n", "family 'clip_v9' is not one of"),
        ("family: open_clip\nmodel: ViT-B-32\n", "threshold must be a cosine between -1 and 1, got None"),
        ("family: pixels\nthreshold: 2\n", "threshold must be a cosine between -1 and 1, got 2"),
        ("family: open_clip\nthreshold: 0.9\n", "family open_clip needs a model"),
        ("family: pixels\nmodel: x\nthreshold: 0.99\n", "family pixels has a fixed model"),
        ("family: pixels\nthreshold: 0.99\nsize: 16\n", "unknown field(s) ['size']"),
        ("family: pixels\nthreshold: 0.99\noptions: {colour: true}\n", "options of family pixels are a mapping of"),
        ("- family: pixels\n", "an embedder config is a mapping"),
        ("family: [pixels\n", "not a readable embedder config"),
    ],
)
def test_a_bad_embedder_config_is_refused_naming_the_file(tmp_path, capsys, config, expected):
    path = tmp_path / "mine.yaml"
    path.write_text(config)
    code = main(["scan", "--eval-folder", str(tmp_path), "--corpus", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--embedder", str(path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"{path}: {expected}" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_an_unknown_embedder_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown embedder 'clip-vit-h-14': use a name \(clip-vit-l-14, "):
        embedder_config("clip-vit-h-14")
