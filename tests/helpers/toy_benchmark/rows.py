"""The toy benchmark's fixture: four rows as its hub dataset holds them, each about a tiny real photo."""

from __future__ import annotations

from helpers.fixtures import real_photos

TOPICS = ("animals", "animals", "space", "space")


def hub_rows() -> list[dict]:
    photos = real_photos(size=32)
    return [
        {
            "qid": f"toy-{i}",
            "prompt": f"What is in photo {i}?",
            "choices": [f"thing {i}-{k}" for k in range(3)],
            "correct": "ABC"[i % 3],
            "topic": topic,
            "picture": {"bytes": photos[i], "path": None},
        }
        for i, topic in enumerate(TOPICS)
    ]
