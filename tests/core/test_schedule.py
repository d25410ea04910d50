"""The critique-strength schedule on verl's 1-based trainer global steps."""

import pytest

from arew.core.config import ScheduleConfig, parse_config
from arew.core.schedule import schedule_factor


def factors(schedule, steps):
    return [schedule_factor(schedule, s) for s in steps]


def test_default_applies_from_the_first_global_step():
    schedule = parse_config({}).schedule
    assert factors(schedule, [1, 2, 100]) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("start", [0, 1])
def test_warmup_from_the_first_global_step_starts_at_one_over_warmup(start):
    # verl's first step is 1: the ramp must give 1/4 there, not 1/2 (the audit's bug with start_step=0)
    schedule = parse_config({"schedule": {"start_step": start, "warmup_steps": 4}}).schedule
    assert factors(schedule, [1, 2, 3, 4, 5, 9]) == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_warmup_after_a_later_start():
    schedule = ScheduleConfig(start_step=10, warmup_steps=4)
    assert factors(schedule, [9, 10, 11, 12, 13, 14]) == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]


@pytest.mark.parametrize("step", [1, 3, 4])
def test_no_critiques_before_start_without_warmup(step):
    # without the step < start_step guard the formula gives full strength here
    assert schedule_factor(ScheduleConfig(start_step=5), step) == 0.0


@pytest.mark.parametrize("step", [1, 5, 7, 8])
def test_no_critiques_before_start_with_warmup(step):
    # without the guard the ramp formula gives (step - 9 + 1) / 4, non-zero at all of these
    assert schedule_factor(ScheduleConfig(start_step=9, warmup_steps=4), step) == 0.0


def test_end_step_is_the_first_step_without_critiques():
    schedule = ScheduleConfig(start_step=3, end_step=6, warmup_steps=2)
    assert factors(schedule, [2, 3, 4, 5, 6, 7, 50]) == [0.0, 0.5, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_end_step_cuts_a_ramp_short():
    schedule = ScheduleConfig(start_step=1, end_step=3, warmup_steps=4)
    assert factors(schedule, [1, 2, 3, 4]) == [0.25, 0.5, 0.0, 0.0]
