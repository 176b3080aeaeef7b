"""Option orders for CircularEval's rotations and MM-Detect's shuffle, and questions rewritten in them.

An order lists, for each position of the new question, which of the old options it shows. Shuffles
are drawn from a generator seeded by hashlib of the item id, so every process and run agrees.
"""

from __future__ import annotations

import re
import string

import numpy as np

from lmms_contam.letters import option_letters
from lmms_contam.registry.base import COLUMNS, INLINE
from lmms_contam.registry.benchmarks.mmstar import MMSTAR_OPTIONS, mmstar_options
from lmms_contam.registry.benchmarks.realworldqa import LETTER_LINE, realworldqa_options
from lmms_contam.registry.specs import SPECS, with_detectors
from lmms_contam.schema import PerturbedSetError
from lmms_contam.stats import stable_seed

Order = tuple[int, ...]
MASK = "[MASK]"  # what the masked-option detector shows in place of the option it hides
NOT_A_LETTER = re.compile(r"[^A-Za-z]")


def rotations(n_options: int) -> list[Order]:
    """CircularEval's n orders: rotation r shows old option (j + r) mod n at position j."""
    return [tuple((j + r) % n_options for j in range(n_options)) for r in range(n_options)]


def names_option_letters(options: list[str]) -> bool:
    """VLMEvalKit's rule for leaving an item out of CircularEval: an option whose text names two or more
    of the item's option letters as words ("A and B"; case-sensitive, anything but ASCII letters splits
    words), or that is itself a letter or a run of the alphabet ("B", "CD"). Rotating such an item
    changes what its options mean."""
    letters = set(option_letters(len(options)))
    for text in options:
        if len(letters & set(NOT_A_LETTER.sub(" ", text).split())) > 1 or (text and text in string.ascii_uppercase):
            return True
    return False


def gold_moving_shuffle(item_id: str, n_options: int, gold_index: int) -> Order:
    """A seeded shuffle redrawn until the gold option leaves its position, as MM-Detect does."""
    if n_options < 2:
        raise ValueError(f"{item_id}: a shuffle needs at least two options, got {n_options}")
    rng = np.random.default_rng(stable_seed("option-shuffle", item_id))
    while True:
        order = tuple(int(i) for i in rng.permutation(n_options))
        if order.index(gold_index) != gold_index:
            return order


def _parse(benchmark: str, question: str) -> list[str] | None:
    return mmstar_options(question) if SPECS[benchmark].option_layout == INLINE else realworldqa_options(question)


def reorder_question(benchmark: str, item_id: str, question: str, options: list[str], order: Order) -> str:
    """The question with its listed options in `order`; refuses a question that does not list `options`."""
    return relist_question(benchmark, item_id, question, options, [options[i] for i in order])


def relist_question(benchmark: str, item_id: str, question: str, options: list[str], shown: list[str]) -> str:
    """The question listing `shown` where it lists `options`; refuses a question that does not list them."""
    if benchmark not in SPECS or SPECS[benchmark].option_layout is None:
        raise PerturbedSetError(f"option-order detectors support {', '.join(with_detectors())}, not {benchmark}")
    if _parse(benchmark, question) != list(options):
        raise PerturbedSetError(
            f"{benchmark} item {item_id}: the question text does not list the row's options {list(options)}; "
            "the option-order detectors rewrite that list and cannot run on this item"
        )
    letters = option_letters(len(options))
    if SPECS[benchmark].option_layout == INLINE:
        head = question[: MMSTAR_OPTIONS.search(question).start()]
        rewritten = head + "\nOptions: " + ", ".join(f"{ltr}: {text}" for ltr, text in zip(letters, shown, strict=True))
    else:
        lines, position = question.split("\n"), 0
        for index, line in enumerate(lines):
            match = LETTER_LINE.match(line.strip())
            if position < len(shown) and match and match[1] == letters[position]:
                lines[index] = f"{letters[position]}. {shown[position]}"
                position += 1
        rewritten = "\n".join(lines)
    if _parse(benchmark, rewritten) != shown:
        raise PerturbedSetError(f"{benchmark} item {item_id}: its options cannot be relisted unambiguously")
    return rewritten


def question_stem(benchmark: str, question: str) -> str:
    """The question without the options it lists (and, for one-option-per-line questions, without the
    instruction after them): what a harness that shows the options itself (VLMEvalKit's "Options:" lines)
    asks. A question whose options are fields of the document is its own stem."""
    layout = SPECS[benchmark].option_layout
    if layout == INLINE:
        match = MMSTAR_OPTIONS.search(question)
        return question[: match.start()].strip() if match else question.strip()
    if layout == COLUMNS or layout is None:
        return question.strip()
    lines = question.split("\n")
    first = next((i for i, line in enumerate(lines) if LETTER_LINE.match(line.strip())), len(lines))
    return "\n".join(lines[:first]).strip()


def shown_as(benchmark: str, item_id: str, question: str, options: list[str], shown: list[str]) -> dict:
    """What a document shows of an item listing `shown` for its options (reordered, or one masked): the
    options, and the question with its list of options rewritten where the question has one."""
    if SPECS[benchmark].option_layout == COLUMNS:
        return {"options": shown, "question": question}
    return {"options": shown, "question": relist_question(benchmark, item_id, question, options, shown)}


def shown_in_order(benchmark: str, item_id: str, question: str, options: list[str], order: Order) -> dict:
    return shown_as(benchmark, item_id, question, options, [options[i] for i in order])


def shown_masked(benchmark: str, item_id: str, question: str, options: list[str], hidden: int) -> dict:
    """The item with option `hidden`'s text replaced by MASK, in the question and the options alike."""
    return shown_as(benchmark, item_id, question, options, [MASK if i == hidden else t for i, t in enumerate(options)])


def gold_letter(order: Order, gold_index: int) -> str:
    """The letter at which `order` shows the old gold option."""
    return option_letters(len(order))[order.index(gold_index)]
