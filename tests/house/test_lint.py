"""ruff's lint, import order included, over everything the project ships and tests (rules: pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"`ruff check .` (fix with `ruff check --fix .`):\n{done.stdout}{done.stderr}"


def test_ruff_catches_an_unsorted_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nprint(os, sys)\n")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1 and "I001" in done.stdout, done.stdout + done.stderr
