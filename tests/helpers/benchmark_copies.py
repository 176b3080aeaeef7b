"""Local copies of the six benchmarks in the layouts lmms-eval's hub datasets have, built from real photos.

Row i shows photo PHOTO_OF(i); a corpus that holds copies of photos 0-7 contaminates exactly the
rows that show one of them (EfficientNet-Lite0: copies score 0.74-0.97, other photos at most 0.38
against them; grass and gravel, 0.53 to each other, both stay out of the corpus).
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from helpers.fixtures import real_photos

N_ITEMS = 32
CORPUS_PHOTOS = range(8)  # photos the corpus holds copies of
LETTERS = "ABCD"


def photo_of(i: int) -> int:
    return i % 16


def contaminated(i: int) -> bool:
    return photo_of(i) in CORPUS_PHOTOS


def gold_letter(i: int) -> str:
    return LETTERS[(i * 7 + 3) % 4]


def _image(photos: list[bytes], i: int) -> dict:
    return {"bytes": photos[photo_of(i)], "path": None}


def mmstar_copy(photos: list[bytes]) -> list[dict]:
    return [{"index": i, "question": f"What is shown in photo {i}?\nOptions: A: a{i}, B: b{i}, C: c{i}, D: d{i}",
             "answer": gold_letter(i), "category": "coarse perception", "l2_category": "image scene and topic",
             "image": _image(photos, i)} for i in range(N_ITEMS)]  # fmt: skip


def realworldqa_copy(photos: list[bytes]) -> list[dict]:
    # No index column: the hub copy has none, and items are then numbered by position.
    return [{"question": f"Which way in photo {i}?\nA. left\nB. right\nC. up\nD. down\nPlease answer directly "
             "with only the letter of the correct option and nothing else.", "answer": gold_letter(i),
             "image": _image(photos, i)} for i in range(N_ITEMS)]  # fmt: skip


def naturalbench_copy(photos: list[bytes]) -> list[dict]:
    rows = []
    for index in range(N_ITEMS):
        group, slot = divmod(index, 4)
        yes_no = group % 2 == 0
        gold = ("Yes", "No", "No", "Yes") if yes_no else ("A", "B", "B", "A")
        question = f"Is there a cat in pair {group}?" if yes_no else f"Which caption fits pair {group}? A. cat B. dog"
        rows.append({"Index": index, "Question": question + (" (again)" if slot >= 2 else ""),
                     "Question_Type": "yes_no" if yes_no else "multiple_choice", "Answer": gold[slot],
                     "Image": _image(photos, 2 * group + slot % 2)})  # fmt: skip
    return rows


def seedbench_copy(photos: list[bytes]) -> list[dict]:
    rows = [{"question_id": f"q{i}", "question": f"What is in photo {i}?", "choice_a": f"a{i}", "choice_b": f"b{i}",
             "choice_c": f"c{i}", "choice_d": f"d{i}", "answer": gold_letter(i), "data_type": "image",
             "data_id": f"img{i}", "question_type_id": 1, "image": [_image(photos, i)]}
            for i in range(N_ITEMS)]  # fmt: skip
    # Two video items (frames, not one image): scored, but not scanned.
    for v in range(2):
        rows.append({"question_id": f"v{v}", "question": f"What happens in clip {v}?", "choice_a": "x", "choice_b": "y",
                     "choice_c": "z", "choice_d": "w", "answer": "C", "data_type": "video", "data_id": f"clip{v}",
                     "question_type_id": 10, "image": [_image(photos, 8 + f) for f in range(3)]})  # fmt: skip
    return rows


def mmbench_copy(photos: list[bytes]) -> list[dict]:
    def row(index: int, base: int, shift: int) -> dict:
        options = [f"a{base}", f"b{base}", f"c{base}", f"d{base}"]
        rotated = options[shift:] + options[:shift]
        gold = LETTERS[(LETTERS.index(gold_letter(base)) - shift) % 4]
        hint = "nan" if base % 3 else f"Hint {base}."
        return {"index": index, "question": f"What is in photo {base}?", "hint": hint,
                **dict(zip(LETTERS, rotated, strict=True)), "answer": gold, "category": "image_scene",
                "L2-category": "coarse_perception", "source": "test", "split": "dev",
                "image": _image(photos, base)}  # fmt: skip

    # Items 0-3 also have one circular copy each (index + 1e6), as MMBench numbers them.
    return [row(i, i, 0) for i in range(N_ITEMS)] + [row(1_000_000 + i, i, 1) for i in range(4)]


def mme_copy(photos: list[bytes]) -> list[dict]:
    rows = []
    categories = ("existence", "count", "commonsense_reasoning", "OCR")
    for pair in range(N_ITEMS // 2):
        category = categories[pair % 4]
        for answer in ("Yes", "No"):
            rows.append({"question_id": f"{category}/{pair:04d}.png", "category": category, "answer": answer,
                         "question": f"Is this photo {pair} ({answer.lower()} version)? Please answer yes or no.",
                         "image": _image(photos, pair)})  # fmt: skip
    return rows


def scienceqa_copy(photos: list[bytes]) -> list[dict]:
    # Options in `choices`, the answer an index into them; a context hint on every third item.
    return [{"question": f"Which object is in photo {i}?", "choices": [f"a{i}", f"b{i}", f"c{i}", f"d{i}"],
             "answer": LETTERS.index(gold_letter(i)), "hint": "" if i % 3 else f"Photo {i} was taken outdoors.",
             "task": "closed choice", "grade": "grade4", "subject": "natural science",
             "topic": "science-and-engineering-practices",
             "category": "Designing experiments", "skill": "Identify questions", "lecture": "", "solution": "",
             "image": _image(photos, i)} for i in range(N_ITEMS)]  # fmt: skip


def ai2d_copy(photos: list[bytes]) -> list[dict]:
    # Options in `options`, the answer an index into them, written as text.
    return [{"question": f"Which label points at photo {i}?", "options": [f"a{i}", f"b{i}", f"c{i}", f"d{i}"],
             "answer": str(LETTERS.index(gold_letter(i))), "image": _image(photos, i)}
            for i in range(N_ITEMS)]  # fmt: skip


def mmmu_copy(photos: list[bytes]) -> list[dict]:
    # Options as the text of a Python list; one open question and one about two images, which are not perturbed
    # or scanned (no options to swap to; no one image).
    rows = [{"id": f"validation_Art_{i}", "question": f"<image 1> What is painted in photo {i}?",
             "options": repr([f"a{i}", f"b{i}", f"c{i}", f"d{i}"]), "question_type": "multiple-choice",
             "answer": gold_letter(i), "image_1": _image(photos, i), "image_2": None}
            for i in range(N_ITEMS)]  # fmt: skip
    rows.append({"id": "validation_Art_100", "question": "<image 1> How many strokes are there?", "options": "[]",
                 "question_type": "open", "answer": "3", "image_1": _image(photos, 9), "image_2": None})  # fmt: skip
    rows.append({"id": "validation_Art_101", "question": "Which is older, <image 1> or <image 2>?",
                 "options": repr(["the first", "the second"]), "question_type": "multiple-choice", "answer": "A",
                 "image_1": _image(photos, 10), "image_2": _image(photos, 11)})  # fmt: skip
    return rows


def write_corpus_folder(folder: Path) -> Path:
    """Re-encoded, resized copies of the corpus photos (captions name them) and unrelated photos."""
    from sklearn.datasets import load_sample_images

    folder.mkdir(parents=True)
    photos = real_photos(size=128)
    for p in CORPUS_PHOTOS:
        image = Image.open(io.BytesIO(photos[p])).convert("RGB").resize((100, 100))
        image.save(folder / f"copy{p}.jpg", quality=60)
        (folder / f"copy{p}.txt").write_text(f"a web copy of photo {p} showing c{p}")
    for n, array in enumerate(load_sample_images().images):
        Image.fromarray(array).resize((120, 90)).save(folder / f"unrelated{n}.jpg")
        (folder / f"unrelated{n}.txt").write_text("holiday snapshot")
    return folder


def naturalbench_photo(row: dict) -> int | None:
    group, slot = divmod(row["Index"], 4)
    return photo_of(2 * group + slot % 2)


def seedbench_photo(row: dict) -> int | None:
    return photo_of(int(row["question_id"][1:])) if row["data_type"] == "image" else None


def mmbench_photo(row: dict) -> int | None:
    return photo_of(row["index"] % 1_000_000)


def mme_photo(row: dict) -> int | None:
    return photo_of(int(row["question_id"].split("/")[1][:4]))


def mmmu_photo(row: dict) -> int | None:
    one_image = row["question_type"] == "multiple-choice" and "<image 2>" not in row["question"]
    return photo_of(int(row["id"].rsplit("_", 1)[1])) if one_image else None


def photo_in_question(row: dict) -> int | None:
    """The copies whose question names the photo they show ("... photo 7?")."""
    return photo_of(int(row["question"].split("photo ")[1].split("?")[0]))
