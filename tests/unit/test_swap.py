import os
import subprocess
import sys
from collections import Counter

from PIL import Image

from lmms_contam.items import Item, Skipped
from lmms_contam.perturb.swap import swap_answer

IMAGE = Image.new("RGB", (4, 4))


def item(i: int, answer: str = "B", options=("w", "x", "y", "z"), benchmark: str = "mmstar") -> Item:
    return Item(benchmark, str(i), "q", tuple(options), answer, IMAGE)


def test_new_answer_is_another_option_and_uniform():
    picks = [swap_answer(item(i)) for i in range(3000)]
    assert "B" not in picks
    counts = Counter(picks)
    assert set(counts) == {"A", "C", "D"}
    assert all(900 < n < 1100 for n in counts.values()), counts


def test_seed_changes_the_draw_and_text_answers_swap_to_text():
    assert [swap_answer(item(i), seed=0) for i in range(50)] != [swap_answer(item(i), seed=1) for i in range(50)]
    assert swap_answer(item(0, "Yes", ("Yes", "No"), "naturalbench")) == "No"


def test_unusable_items_are_skipped_with_a_reason():
    assert isinstance(swap_answer(item(0, "A", ("only",))), Skipped)
    skipped = swap_answer(item(0, "E"))
    assert isinstance(skipped, Skipped) and "not among the options" in skipped.reason


def test_same_draw_in_another_process():
    code = (
        "from PIL import Image; from lmms_contam.items import Item; from lmms_contam.perturb.swap import swap_answer;"
        "print(''.join(swap_answer(Item('mmstar', str(i), 'q', tuple('wxyz'), 'B', Image.new('RGB', (4, 4))))"
        " for i in range(40)))"
    )
    here = "".join(swap_answer(item(i)) for i in range(40))
    for salt in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": salt}
        assert (
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.strip() == here
        )
