"""The README stays short and its commands are CI's; the docs site builds strictly; the version means one thing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import tomllib
from helpers.paths import REPO

from lmms_contam import __version__


def fenced_bash(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_the_readme_is_short_and_its_two_commands_are_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    blocks = fenced_bash(readme)
    set_up = next(b.strip() for b in blocks if "pip install -e" in b and "lmms-contam demo" in b)
    tests = next(b.strip() for b in blocks if "pytest -q" in b)
    ci = (REPO / ".ci" / "run").read_text()
    assert set_up.removesuffix(" && lmms-contam demo") in ci  # CI sets up without the demo: a test runs it
    assert tests in ci
    # The first screen: what it is, then how to check a model.
    assert readme.index("## Check a model with lmms-eval") < readme.index("## What the verdicts mean")
    # Every link to a file of the repository resolves.
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme) + re.findall(r'src="([^":]+)"', readme):
        assert (REPO / target).exists(), target


def test_the_docs_site_builds_strictly_with_every_page_in_its_navigation(tmp_path):
    """--strict turns a broken link or anchor, a page left out of the navigation and a missing API
    reference into a failed build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    assert "scan_matrix" in reference and "holm_adjust" in reference  # docstrings rendered, not just headings
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    assert f"{__version__} (" in changelog


def test_one_version_in_the_package_its_metadata_the_changelog_and_the_cli():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == declared
    newest = re.search(r"^## (\S+) \(", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    assert newest and newest.group(1) == declared
    shown = subprocess.run(
        [sys.executable, "-m", "lmms_contam.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert shown.stdout.strip() == f"lmms-contam {declared}"
