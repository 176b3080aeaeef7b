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


MAX_FUNCTION_LINES = 60
GENERATED = ("hosts/lmms_eval/task_functions.py",)  # written by `tasks generate`


def _long_functions(source: str) -> list[tuple[str, int]]:
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno >= MAX_FUNCTION_LINES
    ]


def test_the_check_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert _long_functions(f"def long():\n{body}\n") == [("long", MAX_FUNCTION_LINES + 1)]
    assert _long_functions(f"def short():\n{body.rsplit(chr(10), 1)[0]}\n") == []


def test_no_function_is_longer_than_sixty_lines():
    found = [
        f"{path.relative_to(PACKAGE)}:{name} ({lines} lines)"
        for path in _sources()
        if str(path.relative_to(PACKAGE)) not in GENERATED
        for name, lines in _long_functions(path.read_text())
    ]
    assert not found, f"functions to split where a reader would want a name: {found}"
