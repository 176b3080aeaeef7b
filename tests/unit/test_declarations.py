"""The package's declarations read like data: no formatter opt-outs, no long positional constructor calls."""

from __future__ import annotations

import ast
from pathlib import Path

import lmms_contam

PACKAGE = Path(lmms_contam.__file__).parent
MAX_POSITIONAL = 3


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_opts_out_of_the_formatter():
    opted_out = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in _sources()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert not opted_out, f"formatter opt-outs: {opted_out}"


def _long_constructor_calls(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or len(node.args) <= MAX_POSITIONAL:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name[:1].isupper():
            found.append((node.lineno, name))
    return found


def test_the_check_finds_a_long_positional_constructor_call():
    assert _long_constructor_calls("Row(1, 2, 3, 4)") == [(1, "Row")]
    assert _long_constructor_calls("Row(1, 2, 3, d=4)\nrun(1, 2, 3, 4)") == []


def test_no_constructor_call_has_more_than_three_positional_arguments():
    found = [
        f"{path.relative_to(PACKAGE)}:{line} {name}"
        for path in _sources()
        for line, name in _long_constructor_calls(path.read_text())
    ]
    assert not found, f"constructor calls to write with keyword arguments: {found}"
