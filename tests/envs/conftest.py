"""Fixtures shared by the environment tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def real_data_dir() -> Path | None:
    """The shared reference data (env AREW_REAL_DATA, or a ``shared/data`` beside or inside the checkout)."""
    root = Path(__file__).resolve().parents[2]
    for candidate in (os.environ.get("AREW_REAL_DATA"), root / "shared" / "data", root.parent / "shared" / "data"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None
