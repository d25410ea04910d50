"""Critique strength over training: off before ``start_step``, linear warm-up, off from ``end_step``.

Steps are verl's trainer global steps, which start at 1 (the lab counts the same way).
``start_step`` is the first step with critiques; as no step 0 exists, ``start_step = 0`` (the
default) and ``1`` both mean "from the first step". The warm-up is defined on those 1-based
steps: with ``warmup_steps = w`` the factor is 1/w at the first step with critiques
(``max(start_step, 1)``), 2/w at the next, and 1 from ``w`` steps in.
"""

from __future__ import annotations

from arew.core.config import ScheduleConfig


def schedule_factor(schedule: ScheduleConfig, step: int) -> float:
    """Multiplier in [0, 1] for the configured strength at trainer global step ``step`` (1-based)."""
    if step < schedule.start_step:
        return 0.0
    if schedule.end_step is not None and step >= schedule.end_step:
        return 0.0
    if schedule.warmup_steps == 0:
        return 1.0
    first = max(schedule.start_step, 1)  # verl's first global step is 1
    return min(1.0, (step - first + 1) / schedule.warmup_steps)
