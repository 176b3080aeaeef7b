"""The laboratory is apart from the product: nothing the product runs imports it, and what it alone needs (peft)
is its extra's, not a dependency of `pip install lmms-contam`."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib.metadata import entry_points, requires

from helpers.paths import REPO

PACKAGE = REPO / "lmms_contam"
LAB = "lmms_contam.lab"


def _imported(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def test_no_module_of_the_product_imports_the_lab():
    product = [p for p in PACKAGE.rglob("*.py") if (PACKAGE / "lab") not in p.parents]
    assert len(product) > 100
    offending = {
        str(p.relative_to(REPO)): sorted(n for n in _imported(p) if n == LAB or n.startswith(f"{LAB}."))
        for p in product
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_peft_is_the_experiments_extra_s_only():
    """As installed: `pip install lmms-contam` pulls no peft; the lab's commands are an entry point."""
    peft = [r for r in requires("lmms-contam") if r.startswith("peft")]
    assert peft and all('extra == "experiments"' in r for r in peft), peft
    (lab,) = entry_points(group="lmms_contam.commands")
    assert (lab.name, lab.value) == ("lab", "lmms_contam.lab.commands:add_commands")


def test_the_command_line_loads_only_the_lab_s_command_declarations():
    """Building every command's parser (the lab's included) imports no experiment module, no peft and no torch."""
    probe = (
        "import sys, lmms_contam, lmms_contam.cli as cli; parser = cli.build_parser(); "
        "print(sorted(m for m in sys.modules if m.startswith('lmms_contam.lab') or m in ('peft', 'torch')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['lmms_contam.lab', 'lmms_contam.lab.commands']"
    help_text = subprocess.run([sys.executable, "-m", "lmms_contam.cli", "--help"], capture_output=True, text=True)
    assert all(command in help_text.stdout for command in ("demo", "experiment", "bench-scan", "report"))
