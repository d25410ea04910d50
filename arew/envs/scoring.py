"""Belief-vector rules shared by the multiple-choice tasks (MediQ, FloDial)."""

from __future__ import annotations

import numpy as np

EQUAL_TOL = 1e-9
"""Scores closer than this are equal: agents write at most a few decimals, so this only
absorbs float noise."""


def unique_argmax(w: np.ndarray) -> int | None:
    """Index of the single highest score, or None on a tie for the top."""
    w = np.asarray(w, dtype=float)
    best = int(np.argmax(w))
    if np.sum(w >= w[best] - EQUAL_TOL) > 1:
        return None
    return best


def margin(w: np.ndarray, gold: int) -> float:
    """m(w) = w[gold] - max over the other options of w (paper E.3.1, MediQ BT critique)."""
    w = np.asarray(w, dtype=float)
    return float(w[gold] - np.delete(w, gold).max())


def same(a: float | np.ndarray, b: float | np.ndarray) -> bool:
    """Equal up to :data:`EQUAL_TOL` in every entry."""
    return bool(np.all(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)) <= EQUAL_TOL))
