"""The layer contracts of docs/architecture.md (`.importlinter`), checked with import-linter (#33):
the core (gui.cluster) and the agent import no Qt, the agent imports nothing of the app, the widgets
reach the agent only through the core, the core imports none of the views around it, and no
modules of a package import one another in a circle.

The first test runs `lint-imports` on this tree, so CI's `python -m pytest` fails on an import
across a wall. The others prove each contract can fail: a copy of the tree with one wrong import
added must be refused, with the contract named.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# import-linter's own entry point, run by this interpreter (its console script may not be on PATH)
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """Run `lint-imports` on the packages of `tree` with the contracts of `tree/.importlinter`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}  # grimp finds gui/ and agent/ of this tree, no other
    return subprocess.run([*LINT_IMPORTS, "--no-cache"], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_tree_keeps_every_layer_contract():
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def copy_of_the_tree(dest: Path) -> Path:
    """The two packages' Python files and the contracts, copied to `dest`."""
    for package in ("gui", "agent"):
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", dest / ".importlinter")
    return dest


@pytest.mark.parametrize(("module", "wrong_import", "contract"), [
    ("gui/cluster/planning/devices.py", "from PySide6.QtCore import QObject", "import no Qt"),
    ("agent/lease.py", "import pyqtgraph", "import no Qt"),
    ("agent/lease.py", "from gui.cluster import workspace", "imports nothing of the app"),
    ("gui/widgets/feedback.py", "from agent.protocol import PIN_DIGITS", "only through the core"),
    ("gui/cluster/workspace.py", "from gui.widgets import feedback", "imports none of the app around it"),
    ("gui/cluster/workspace.py", "import gui.session", "imports none of the app around it"),
    # agent.daemon imports agent.lease: this closes a circle
    ("agent/lease.py", "from agent import daemon", "No cycles are allowed in agent"),
])
def test_a_wrong_import_breaks_its_contract(tmp_path, module, wrong_import, contract):
    tree = copy_of_the_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{wrong_import}  # the wrong import under test\n")
    run = lint_imports(tree)
    assert run.returncode != 0, run.stdout
    broken = run.stdout.split("Broken contracts", 1)[1]
    assert contract in broken, broken
    if "cycles" not in contract:  # a circle is named by the package it is in
        assert module.removesuffix(".py").replace("/", ".") in broken, broken
