"""Perturbed-set fixtures in the real schema, built from real photos that packages ship.

skimage.data and scikit-learn carry public-domain / CC0 photographs inside their wheels; the
"perturbed" image of an item is another real photo, so every image in a fixture is a real one.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from helpers.paths import REPO
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.letters import option_letters
from lmms_contam.schema import SCHEMA_VERSION

# The paper authors' released TSVs, as shared/ holds them beside the checkout.
RELEASE = REPO.parent / "shared" / "data" / "mm-perturb"

SKIMAGE_PHOTOS = (
    "astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "retina", "immunohistochemistry",
    "colorwheel", "camera", "coins", "horse", "page", "text", "grass", "gravel", "brick",
)  # fmt: skip

MMSTAR_L2 = (
    ("coarse perception", "image scene and topic"),
    ("coarse perception", "image scene and topic"),
    ("coarse perception", "image style & quality"),
    ("fine-grained perception", "object counting"),
    ("fine-grained perception", "object counting"),
    ("fine-grained perception", "object counting"),
    ("fine-grained perception", "localization"),
    ("instance reasoning", "single-instance reasoning"),
    ("logical reasoning", "diagram reasoning"),
    ("logical reasoning", "diagram reasoning"),
    ("math", "geometry"),
    ("science & technology", "biology & chemistry & physics"),
)


def real_photos(size: int = 96) -> list[bytes]:
    """PNG bytes of real photos, shrunk so fixtures stay small and fast."""
    import skimage.data

    photos = []
    for name in SKIMAGE_PHOTOS:
        array = getattr(skimage.data, name)()
        image = Image.fromarray(np.asarray(array)).convert("RGB")
        image.thumbnail((size, size))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        photos.append(buffer.getvalue())
    return photos


def _pick(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("/".join(parts).encode()).digest()[:4], "little")


def _swap(answer: str, allowed: list[str], *key: str) -> str:
    others = [a for a in allowed if a != answer]
    return others[_pick("swap", *key) % len(others)]


def _provenance(benchmark: str) -> str:
    return json.dumps({"source": "lmms-contam test fixture", "benchmark": benchmark})


LABELLED_MMSTAR_ITEM = 2


def mmstar_rows(photos: list[bytes]) -> list[dict]:
    rows = []
    for i, (category, l2) in enumerate(MMSTAR_L2):
        options = [f"object {i}-{k}" for k in range(4)]
        if i == LABELLED_MMSTAR_ITEM:  # an option naming option letters: CircularEval leaves the item out
            options[2] = "A and B"
        letters = option_letters(4)
        original = letters[_pick("mmstar", str(i)) % 4]
        listed = ", ".join(f"{letter}: {text}" for letter, text in zip(letters, options, strict=True))
        rows.append(
            {
                "item_id": f"mmstar-{i}",
                "original_id": str(i),
                "benchmark": "mmstar",
                "question": f"Which object is shown in the image?\nOptions: {listed}",
                "options": options,
                "original_answer": original,
                "new_answer": _swap(original, letters, "mmstar", str(i)),
                "original_image": {"bytes": photos[i % len(photos)]},
                "image": {"bytes": photos[(i + 5) % len(photos)]},
                "category": category,
                "l2_category": l2,
                "provenance": _provenance("mmstar"),
                "schema_version": SCHEMA_VERSION,
            }
        )
    return rows


def realworldqa_rows(photos: list[bytes], n: int = 12) -> list[dict]:
    rows = []
    for i in range(n):
        options = ["left", "right", "straight ahead"]
        letters = option_letters(3)
        original = letters[_pick("rwqa", str(i)) % 3]
        listed = "\n".join(f"{letter}. {text}" for letter, text in zip(letters, options, strict=True))
        rows.append(
            {
                "item_id": f"realworldqa-{i}",
                "original_id": str(100 + i),
                "benchmark": "realworldqa",
                "question": f"Where does the road lead?\n{listed}\nPlease answer directly with only the letter "
                "of the correct option and nothing else.",
                "options": options,
                "original_answer": original,
                "new_answer": _swap(original, letters, "rwqa", str(i)),
                "original_image": {"bytes": photos[(i + 2) % len(photos)]},
                "image": {"bytes": photos[(i + 9) % len(photos)]},
                "provenance": _provenance("realworldqa"),
                "schema_version": SCHEMA_VERSION,
            }
        )
    return rows


def _lettered_rows(benchmark: str, photos: list[bytes], n_options: int, question: Callable[[int], str],
                   shift: tuple[int, int], first_id: int = 0, n: int = 12,
                   extra: Callable[[int], dict] = lambda _i: {}) -> list[dict]:  # fmt: skip
    """Items whose options are fields of the row ("<benchmark> option <i>-<k>"), lettered answers swapped by a
    hash of the item; the original and edited images are photos i + shift[0] and i + shift[1]."""
    rows = []
    letters = option_letters(n_options)
    for i in range(n):
        original = letters[_pick(benchmark, str(i)) % n_options]
        rows.append(
            {
                "item_id": f"{benchmark}-{i}",
                "original_id": str(first_id + i),
                "benchmark": benchmark,
                "question": question(i),
                "options": [f"{benchmark} option {i}-{k}" for k in range(n_options)],
                "original_answer": original,
                "new_answer": _swap(original, letters, benchmark, str(i)),
                "original_image": {"bytes": photos[(i + shift[0]) % len(photos)]},
                "image": {"bytes": photos[(i + shift[1]) % len(photos)]},
                **extra(i),
                "provenance": _provenance(benchmark),
                "schema_version": SCHEMA_VERSION,
            }
        )
    return rows


def seedbench_rows(photos: list[bytes]) -> list[dict]:
    """SEED-Bench's image items: four options as fields of the document, none listed in the question."""
    return _lettered_rows(
        "seedbench",
        photos,
        4,
        lambda i: f"What stands in the middle of photo {i}?",
        (3, 7),
        extra=lambda i: {"question_type_id": str(1 + i % 9)},
    )  # its 9 image dimensions


MMBENCH_FIRST_ID = 40


def mmbench_hint(original_id: str) -> str | None:
    """The hint of a fixture item, in the hub's rows (a third of them have one)."""
    i = int(original_id) - MMBENCH_FIRST_ID
    return f"Hint {i}: look at the sky." if i % 3 == 0 else None


def mmbench_rows(photos: list[bytes]) -> list[dict]:
    """MMBench's items: three options as fields (the fourth "nan" in the hub's rows), the hint joined to the head
    of the question where there is one, as the parser does."""

    def question(i: int) -> str:
        hint = mmbench_hint(str(MMBENCH_FIRST_ID + i))
        return f"{hint} What colour dominates photo {i}?" if hint else f"What colour dominates photo {i}?"

    def categories(i: int) -> dict:
        return {"category": "image_scene", "l2_category": ("coarse_perception", "fine-grained_perception")[i % 2]}

    return _lettered_rows("mmbench", photos, 3, question, (4, 6), MMBENCH_FIRST_ID, extra=categories)


def scienceqa_rows(photos: list[bytes]) -> list[dict]:
    """ScienceQA's image items: the options are `choices`, a context hint (empty on most items) its own field."""

    def hint(i: int) -> dict:
        return {"hint": "" if i % 4 else f"The object in photo {i} is in a kitchen."}

    question = "Which material is the object in photo {} made of?".format
    return _lettered_rows("scienceqa", photos, 3, question, (1, 8), extra=hint)


def mmmu_rows(photos: list[bytes]) -> list[dict]:
    """MMMU's multiple-choice questions about one image: the question names it (<image 1>), the id the subject."""
    rows = _lettered_rows("mmmu", photos, 4, lambda i: f"<image 1> What is painted in photo {i}?", (5, 9))
    return [{**row, "original_id": f"validation_Art_{row['original_id']}"} for row in rows]


def ai2d_rows(photos: list[bytes]) -> list[dict]:
    """AI2D's diagram questions: the options a field of the document, the answer an index into them."""
    return _lettered_rows("ai2d", photos, 4, lambda i: f"Which part of the diagram in photo {i} is labelled?", (10, 2))


NATURALBENCH_GOLD = {"q0_i0": 0, "q0_i1": 1, "q1_i0": 1, "q1_i1": 0}  # index into options: Yes/A first


def naturalbench_rows(photos: list[bytes], groups: int = 3) -> list[dict]:
    rows = []
    for g in range(groups):
        yes_no = g != 1
        options = ["Yes", "No"] if yes_no else ["A", "B"]
        for slot, gold in NATURALBENCH_GOLD.items():
            index = 4 * g + list(NATURALBENCH_GOLD).index(slot)
            question = (
                f"Is there a cat in picture {g}?" if yes_no else f"Which caption fits picture {g}? A. a cat B. a dog"
            )
            image = int(slot[-1])
            rows.append(
                {
                    "item_id": f"naturalbench-{index}",
                    "original_id": str(index),
                    "benchmark": "naturalbench",
                    "question": question + ("" if slot.startswith("q0") else " (second question)"),
                    "options": options,
                    "original_answer": options[gold],
                    "new_answer": options[1 - gold],
                    "original_image": {"bytes": photos[(2 * g + image) % len(photos)]},
                    "image": {"bytes": photos[(2 * g + image + 7) % len(photos)]},
                    "question_type": "yes_no" if yes_no else "multiple_choice",
                    "group_id": str(g),
                    "group_slot": slot,
                    "provenance": _provenance("naturalbench"),
                    "schema_version": SCHEMA_VERSION,
                }
            )
    return rows


MME_CATEGORIES = ("existence", "commonsense_reasoning")  # one perception, one cognition category


def mme_rows(photos: list[bytes], pairs: int = 6) -> list[dict]:
    """MME's yes/no questions, two per image (its question_id), in that order as the hub holds them; each is
    swapped to the other answer and gets its own edited image."""
    rows = []
    for pair in range(pairs):
        question_id = f"{MME_CATEGORIES[pair % 2]}/{pair:04d}.png"
        for slot, (thing, answer) in enumerate((("dog", "Yes"), ("horse", "No"))):
            i = 2 * pair + slot
            rows.append(
                {
                    "item_id": f"mme-{i}",
                    "original_id": f"{question_id}#{slot}",
                    "benchmark": "mme",
                    "question": f"Is there a {thing} in photo {pair}? Please answer yes or no.",
                    "options": ["Yes", "No"],
                    "original_answer": answer,
                    "new_answer": "No" if answer == "Yes" else "Yes",
                    "original_image": {"bytes": photos[pair % len(photos)]},
                    "image": {"bytes": photos[(i + 5) % len(photos)]},
                    "category": MME_CATEGORIES[pair % 2],
                    "group_id": question_id,
                    "group_slot": f"q{slot}",
                    "provenance": _provenance("mme"),
                    "schema_version": SCHEMA_VERSION,
                }
            )
    return rows


def hub_row(benchmark: str, row: dict, variant: str) -> dict:
    """One version of a fixture item as a row of the benchmark's hub dataset, written out here, not by the plugin's
    document shapes."""
    perturbed = variant == "perturbed"
    answer, image = (row["new_answer"], row["image"]) if perturbed else (row["original_answer"], row["original_image"])
    if benchmark == "realworldqa":  # the hub's rows have no index: items are numbered by position
        return {"question": row["question"], "answer": answer, "image": image}
    if benchmark == "mmstar":
        return {"index": int(row["original_id"]), "question": row["question"], "answer": answer,
                "category": row["category"], "l2_category": row["l2_category"], "image": image}  # fmt: skip
    if benchmark == "seedbench":
        return {"question_id": row["original_id"], "question": row["question"], "answer": answer,
                **{f"choice_{letter}": text for letter, text in zip("abcd", row["options"], strict=True)},
                "data_type": "image", "data_id": row["original_id"], "question_type_id": int(row["question_type_id"]),
                "image": [image]}  # fmt: skip
    if benchmark == "mmbench":
        hint = mmbench_hint(row["original_id"])
        return {"index": int(row["original_id"]), "hint": hint or "nan",
                "question": row["question"].removeprefix(f"{hint} "), "answer": answer,
                **dict(zip("ABCD", [*row["options"], "nan"], strict=True)), "category": row["category"],
                "L2-category": row["l2_category"], "source": "test", "split": "dev", "image": image}  # fmt: skip
    if benchmark == "scienceqa":
        return {"question": row["question"], "choices": row["options"], "hint": row["hint"],
                "answer": option_letters(len(row["options"])).index(answer), "image": image}  # fmt: skip
    if benchmark == "ai2d":
        return {"question": row["question"], "options": row["options"],
                "answer": str(option_letters(len(row["options"])).index(answer)), "image": image}  # fmt: skip
    if benchmark == "mmmu":
        return {"id": row["original_id"], "question": row["question"], "options": repr(row["options"]),
                "question_type": "multiple-choice", "answer": answer, "image_1": image}  # fmt: skip
    if benchmark == "mme":
        return {"question_id": row["group_id"], "question": row["question"], "answer": answer,
                "category": row["category"], "image": image}  # fmt: skip
    raise ValueError(f"no hub layout for {benchmark} in the fixtures")


def write_hub_copy(benchmark: str, rows: list[dict], variant: str, path: Path) -> Path:
    """The fixture items of one version as a local copy of the benchmark in its hub layout."""
    import datasets

    bound = BINDINGS[benchmark]  # the hub's image column is the one lmms-eval's built-in task reads
    table = datasets.Dataset.from_list([hub_row(benchmark, row, variant) for row in rows])
    image = [datasets.Image()] if bound.image_list else datasets.Image()
    table.cast_column(bound.image_field, image).to_parquet(str(path))
    return path


def answers_right(benchmark: str, row: dict, response: str, variant: str) -> int:
    """What the built-in scorer would say, worked out by hand for single-token responses."""
    gold = row["new_answer"] if variant == "perturbed" else row["original_answer"]
    if benchmark not in ("naturalbench", "mme"):
        return int(response == gold)
    if benchmark == "mme" or row["question_type"] == "yes_no":
        parsed = {"yes": "Yes", "no": "No"}.get(response.lower())
    else:
        parsed = response if response in ("A", "B") else None
    return int(parsed == gold)


def write_mmstar_originals(path: Path, size: int = 224) -> Path:
    """A local MMStar copy in lmms-eval's layout (the original items of the fixture), for `--originals`."""
    import datasets

    rows = mmstar_rows(real_photos(size=size))
    table = [{"index": int(r["original_id"]), "question": r["question"], "answer": r["original_answer"],
              "category": r["category"], "l2_category": r["l2_category"], "image": r["original_image"]}
             for r in rows]  # fmt: skip
    datasets.Dataset.from_list(table).cast_column("image", datasets.Image()).to_parquet(str(path))
    return path


def point_at_sets(monkeypatch, sets: dict[str, Path]) -> None:
    """The tasks resolve each benchmark's set to the given file (LMMS_CONTAM_DATASET_<NAME>)."""
    for benchmark, path in sets.items():
        monkeypatch.setenv(f"LMMS_CONTAM_DATASET_{benchmark.upper()}", str(path))
