"""arew's import contracts (pyproject.toml, ``[tool.importlinter]``) hold: ``lint-imports`` passes.

Run in a fresh process with this interpreter, so that it checks the arew this suite imports; without
its cache, so that it reads the source as it is and writes nothing into the repository.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_the_import_contracts_hold():
    done = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--no-logo", str(REPO / "pyproject.toml")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
