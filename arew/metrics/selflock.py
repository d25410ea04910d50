"""Observation 2 live: does the AS proxy track the reward the agent gets, or only the reward an oracle would get?

Per training step, over the step's episodes that did not fail (verl's padding excluded):

* ``selflock/corr_as_reward``: Pearson correlation between the AS proxy (``proxy_as_mean``) and
  the outcome reward;
* ``selflock/corr_as_oracle``: the same with ``proxy_oracle_reward`` (PE: the rule-based
  tracker replaying the agent's actions), over the episodes that report it;
* ``selflock/corr_gap``: corr_as_oracle - corr_as_reward;
* ``selflock/oracle_reward_gap``: mean oracle reward - mean reward over those episodes.

An undefined correlation (fewer than two episodes, or one side constant, e.g. a step where every
reward is 0) is NaN: verl's file logger writes it as null and W&B shows a gap, so the key is
logged every step and a chart never shows a made-up 0. The oracle keys are absent when no
episode of the step reports the oracle reward (tasks other than PE).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

AS_PROXY = "proxy_as_mean"
ORACLE = "proxy_oracle_reward"


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation of two equally long samples; NaN when fewer than 2 or either is constant."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"pearson: samples of different lengths {a.shape} and {b.shape}")
    if a.size < 2:
        return math.nan
    a, b = a - a.mean(), b - b.mean()
    scale = math.sqrt(float(a @ a) * float(b @ b))
    if scale <= 1e-12 * max(a.size, 1):  # a constant side: no correlation to speak of
        return math.nan
    return float(np.clip(float(a @ b) / scale, -1.0, 1.0))


def _value(numbers: Mapping | None, key: str) -> float | None:
    value = (numbers or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def selflock_metrics(numbers: Sequence[Mapping | None], rewards: Sequence[float], kept: Sequence[bool]) -> dict[str, float]:
    """The ``selflock/*`` keys of one step from each sample's episode numbers, outcome reward and whether it counts."""
    if not (len(numbers) == len(rewards) == len(kept)):
        raise ValueError(f"selflock_metrics: {len(numbers)} numbers, {len(rewards)} rewards and {len(kept)} flags")
    own, oracle = [], []
    for info, reward, keep in zip(numbers, rewards, kept):
        proxy = _value(info, AS_PROXY) if keep else None
        if proxy is None:
            continue
        own.append((proxy, float(reward)))
        if (value := _value(info, ORACLE)) is not None:
            oracle.append((proxy, value, float(reward)))
    metrics = {"selflock/corr_as_reward": pearson(*zip(*own)) if own else math.nan}
    if oracle:
        proxy, value, reward = (np.asarray(column) for column in zip(*oracle))
        metrics["selflock/corr_as_oracle"] = pearson(proxy, value)
        metrics["selflock/corr_gap"] = metrics["selflock/corr_as_oracle"] - pearson(proxy, reward)
        metrics["selflock/oracle_reward_gap"] = float(value.mean() - reward.mean())
    return metrics
