"""Observation 2's per-step correlations on hand-made episodes, undefined cases included."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arew.metrics.selflock import pearson, selflock_metrics


def test_pearson_matches_numpy_and_is_nan_when_undefined():
    x, y = [0.1, 0.5, 0.2, 0.9], [0.0, 1.0, 0.0, 1.0]
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson([0.3], [1.0])) and math.isnan(pearson([], []))
    assert math.isnan(pearson([0.1, 0.4, 0.2], [0.0, 0.0, 0.0]))  # every reward 0: no correlation to speak of
    with pytest.raises(ValueError, match="different lengths"):
        pearson([1, 2], [1, 2, 3])


def _episode(proxy, oracle=None):
    info = {"proxy_as_mean": proxy, "decisions": 3.0}
    if oracle is not None:
        info["proxy_oracle_reward"] = oracle
    return info


def test_pe_episodes_give_both_correlations_and_the_gaps():
    # the proxy tracks the oracle's reward but not the agent's own: the self-locking signature
    numbers = [_episode(0.1, 0.0), _episode(0.5, 0.6), _episode(0.9, 1.0), _episode(0.3, 0.2)]
    rewards = [1.0, 0.0, 0.0, 1.0]
    metrics = selflock_metrics(numbers, rewards, [True] * 4)
    proxy, oracle = [0.1, 0.5, 0.9, 0.3], [0.0, 0.6, 1.0, 0.2]
    assert metrics["selflock/corr_as_reward"] == pytest.approx(np.corrcoef(proxy, rewards)[0, 1])
    assert metrics["selflock/corr_as_oracle"] == pytest.approx(np.corrcoef(proxy, oracle)[0, 1])
    assert metrics["selflock/corr_gap"] == pytest.approx(metrics["selflock/corr_as_oracle"] - metrics["selflock/corr_as_reward"])
    assert metrics["selflock/corr_gap"] > 1.0
    assert metrics["selflock/oracle_reward_gap"] == pytest.approx(np.mean(oracle) - np.mean(rewards))


def test_failed_and_padding_samples_are_left_out():
    numbers = [_episode(0.1, 0.0), _episode(0.9, 1.0), _episode(0.5, 0.7), None]
    metrics = selflock_metrics(numbers, [0.0, 1.0, 5.0, 9.0], [True, True, False, False])
    assert metrics["selflock/corr_as_reward"] == pytest.approx(1.0)  # the third (failed) would break the line
    assert metrics["selflock/oracle_reward_gap"] == pytest.approx(0.0)


def test_tasks_without_the_oracle_log_only_the_own_correlation():
    metrics = selflock_metrics([_episode(0.1), _episode(0.4)], [0.0, 1.0], [True, True])
    assert set(metrics) == {"selflock/corr_as_reward"} and metrics["selflock/corr_as_reward"] == pytest.approx(1.0)


def test_undefined_correlations_are_nan_but_logged():
    constant = selflock_metrics([_episode(0.1, 0.0), _episode(0.4, 1.0)], [0.0, 0.0], [True, True])
    assert math.isnan(constant["selflock/corr_as_reward"]) and constant["selflock/corr_as_oracle"] == pytest.approx(1.0)
    assert math.isnan(constant["selflock/corr_gap"])
    single = selflock_metrics([_episode(0.1, 0.0)], [1.0], [True])
    assert math.isnan(single["selflock/corr_as_reward"]) and math.isnan(single["selflock/corr_as_oracle"])
    assert single["selflock/oracle_reward_gap"] == pytest.approx(-1.0)
    empty = selflock_metrics([None, {}], [0.0, 1.0], [True, True])
    assert list(empty) == ["selflock/corr_as_reward"] and math.isnan(empty["selflock/corr_as_reward"])
    with pytest.raises(ValueError):
        selflock_metrics([None], [0.0, 1.0], [True])
