"""Adding to the package's registries (benchmarks, hosts, each host's bindings): the same entry twice is one, a
second entry under a taken name is refused, so another package cannot silently replace one."""

from __future__ import annotations

from typing import TypeVar

Entry = TypeVar("Entry")


def add_once(table: dict[str, Entry], key: str, entry: Entry, clash: str) -> None:
    """List `entry` under `key`; `clash` is the error when another entry holds the name."""
    if key in table and table[key] is not entry:
        raise ValueError(clash)
    table[key] = entry
