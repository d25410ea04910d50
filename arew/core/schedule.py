"""Critique strength over training: off before ``start_step``, linear warm-up, off from ``end_step``."""

from __future__ import annotations

from arew.core.config import ScheduleConfig


def schedule_factor(schedule: ScheduleConfig, step: int) -> float:
    """Multiplier in [0, 1] for the configured strength at trainer global step ``step``."""
    if step < schedule.start_step:
        return 0.0
    if schedule.end_step is not None and step >= schedule.end_step:
        return 0.0
    if schedule.warmup_steps == 0:
        return 1.0
    return min(1.0, (step - schedule.start_step + 1) / schedule.warmup_steps)
