"""Critique quality, live: how often each channel's critiques point the way the advantage does.

Prop. 4.1 (paper Sec. 4.3, App. C.5) says AReW's first-order gain is eta * W * (2 Acc - 1), with
Acc the weighted accuracy of the critiques z_t against the oracle direction y_t = sign(A_t), A_t
the decision's per-step advantage, each step weighted by w_t = |u_t| |A_t| ||grad log pi||^2. The
estimate puts a per-step advantage estimate a of the batch in place of A_t:

    accuracy = sum |a| * 1[sign z = sign a] / sum |a|

over the decisions with z != 0 (after the transforms, i.e. what training uses, so
``noise.flip_prob`` shows) and a != 0. Of w_t it keeps |A_t|: |u_t| depends on the weighting mode
and on the labels themselves, is zero in one-sided groups (most groups early in training) and
would scale with the adaptive factor this estimate drives; the score norm is not available in the
advantage stage (taken as constant).

Which estimate a is (``quality.direction``, see :func:`resolve_direction`):

* ``outcome``: the base estimator's advantage averaged over the decision's model tokens: the
  group-normalised outcome for GRPO-style estimators, R - V(s_t) for GAE with gamma*lam = 1.
  Unbiased, but it carries every later decision and the outcome's own randomness, and
  sum z a / sum |a| = 2 accuracy - 1 is divided by that inflated |a|: the estimate is pulled
  towards chance by E|A| / E|a|. For AS, whose decisions are followed by the belief updates that
  decide the answer, that factor is close to 0 (PE lab, PPO, clean critiques: 0.509).
* ``increment``: the decision's own share of a critic-based (GAE) advantage: A at its first
  policy token minus A at the next decision's first policy token (the last decision: A at its
  first policy token). GAE's recursion A_i = delta_i + gamma*lam*A_(i+1) over policy tokens makes
  that, for gamma*lam = 1, the sum of the critic's TD errors over the decision's tokens,
  r + V(after) - V(before): the one-step advantage (GAE with lambda = 0), without the later
  decisions' noise (same lab: 0.661). It is as good as the critic: before the critic has learned
  what a decision is worth it can score good critiques below chance (the lab's first 12-19 PPO steps).
  verl whitens GAE advantages, which divides every difference by one positive number (no sign or
  ratio changes) and shifts the last decision's value by the batch mean.

GRPO-style estimators have no per-step baseline, so only ``outcome`` exists for them; where the
outcome does not depend on a channel's decisions, its estimate sits at chance whatever the
critiques' quality (AS while self-locked: Prop. C.11 bounds its signal by C_BT), so read a
near-chance AS estimate together with C_BT.

Two properties follow from the weights not depending on the critiques, for either estimate. With
sign flips of probability alpha, E[accuracy] = acc0 + alpha (1 - 2 acc0) exactly (acc0: the
clean critiques' accuracy; the set of scored decisions and their weights do not change with
alpha): linear and decreasing in alpha when acc0 > 0.5, and exactly 0.5 at alpha = 0.5, where the
signs are independent of everything (flipping every sign maps accuracy r to 1 - r with equal
probability).

The smoothed estimate is a ratio of exponentially weighted sums of both terms, so steps count
by their |a| mass and the first step needs no bias correction; the same symmetry holds for it.

:class:`QualityTracker` keeps that state across steps (the caller owns one per run; it restarts
on a resume), warns once per spell when a channel stays near chance, and gives the adaptive
strength factors. Accuracy is measured on the step's batch before its reweighting, so the factor
applies in the same step. Pure torch; no verl.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from arew.core.config import AdaptiveConfig, AReWConfig, QualityConfig
from arew.core.records import CHANNELS

logger = logging.getLogger(__name__)

CHANCE = 0.5
CRITIC_ESTIMATORS = ("gae",)  # base advantage estimators with a per-step (critic) baseline
POOLED = ""  # the state over both channels together (grouping=pooled); its metrics have no channel in the key


def metric_key(name: str, metric: str) -> str:
    """``arew/<ch>/<metric>`` for a channel, ``arew/<metric>`` for the pooled estimate."""
    return f"arew/{name}/{metric}" if name else f"arew/{metric}"


def resolve_direction(setting: str, estimator: str, discount: float, key: str = "algorithm.arew.quality.direction") -> str:
    """``outcome`` or ``increment`` for a run of base ``estimator`` with GAE's ``discount`` = gamma * lam.

    ``auto`` takes ``increment`` where it is exact (a critic's GAE with gamma * lam = 1) and
    ``outcome`` elsewhere; asking for ``increment`` where it is not fails, naming ``key``.
    """
    exact = estimator in CRITIC_ESTIMATORS and discount == 1.0
    if setting == "auto":
        return "increment" if exact else "outcome"
    if setting == "increment" and not exact:
        if estimator not in CRITIC_ESTIMATORS:
            why = f"the base estimator '{estimator}' has no per-step baseline (one advantage per episode: every decision but the last would score 0)"
        else:
            why = f"it is the sum of the decision's TD errors only for gamma * lam = 1, got {discount:g}"
        raise ValueError(f"{key}: 'increment' needs a critic's GAE advantages ({', '.join(CRITIC_ESTIMATORS)}); {why}; use 'outcome' or 'auto'")
    return setting


def accuracy_sums(label: torch.Tensor, channel: torch.Tensor, advantage: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per channel (index order of ``CHANNELS``): agreeing |a| mass, total |a| mass, scored decisions.

    ``label`` (K,) are the critiques after the transforms, ``channel`` (K,) their channel index and
    ``advantage`` (K,) each decision's advantage estimate a (module docstring); a decision is scored
    when z != 0 and a is a non-zero finite number.
    """
    advantage = advantage.double()
    scored = (label != 0) & (advantage != 0) & torch.isfinite(advantage)
    weight = torch.where(scored, advantage.abs(), torch.zeros_like(advantage))
    agree = torch.where(torch.sign(advantage) == label.double(), weight, torch.zeros_like(weight))
    n = len(CHANNELS)
    return (
        torch.bincount(channel, weights=agree, minlength=n),
        torch.bincount(channel, weights=weight, minlength=n),
        torch.bincount(channel, weights=scored.double(), minlength=n).long(),
    )


def adaptive_factor(accuracy: float | None, full_at: float) -> float:
    """0 at or below chance, rising linearly to 1 at ``full_at``; 1 while there is no estimate yet.

    Linear because Prop. 4.1's gain is proportional to 2 Acc - 1; 0 below chance (the gain turns
    negative there, and reversing the signs would trust a proxy too far); capped at 1 so the
    configured lambda stays the largest strength.
    """
    if accuracy is None:
        return 1.0
    return min(1.0, max(0.0, (accuracy - CHANCE) / (full_at - CHANCE)))


@dataclass
class _State:
    agree: float = 0.0  # exponentially weighted sums of the agreeing and the total |a| mass
    total: float = 0.0
    near_chance: int = 0  # consecutive counted steps with the smoothed estimate in the chance band

    @property
    def smoothed(self) -> float | None:
        return self.agree / self.total if self.total > 0 else None


class QualityTracker:
    """Critique accuracy across a run's steps: smoothing, the near-chance warning, adaptive factors."""

    def __init__(
        self,
        quality: QualityConfig,
        adaptive: AdaptiveConfig,
        channels: tuple[str, ...] = CHANNELS,
        grouping: str = "pooled",
        direction: str = "outcome",
    ):
        if direction not in ("outcome", "increment"):
            raise ValueError(f"direction must be 'outcome' or 'increment' (resolve 'auto' with resolve_direction), got {direction!r}")
        self.quality, self.adaptive, self.grouping, self.direction = quality, adaptive, grouping, direction
        self.channels = tuple(channels)
        self.states = {name: _State() for name in (*CHANNELS, POOLED)}
        self.step = 0  # the global step of the latest update (verl's count from 1; 0: none yet)
        self.last: dict[str, float] = {}  # the latest step's metrics

    @classmethod
    def from_config(cls, config: AReWConfig, estimator: str, discount: float = 1.0) -> QualityTracker:
        """The tracker for a run of base ``estimator`` (``gae``, ``grpo``, ...) with GAE's gamma * lam = ``discount``."""
        direction = resolve_direction(config.quality.direction, estimator, discount)
        return cls(config.quality, config.adaptive, config.enabled_channels, config.grouping, direction)

    def update(self, label: torch.Tensor, channel: torch.Tensor, advantage: torch.Tensor, step: int) -> dict[str, float]:
        """Fold global step ``step``'s decisions into the state; return its ``arew/`` metrics (also in ``last``)."""
        self.step = step
        agree, total, count = accuracy_sums(label, channel, advantage)
        sums = {name: (float(agree[i]), float(total[i]), int(count[i])) for i, name in enumerate(CHANNELS)}
        sums[POOLED] = (float(agree.sum()), float(total.sum()), int(count.sum()))
        stats: dict[str, float] = {}
        for name in (*self.channels, POOLED):
            step_agree, step_total, decisions = sums[name]
            state = self.states[name]
            stats[metric_key(name, "accuracy_decisions")] = float(decisions)
            # NaN: no scored decision this step (e.g. one reward for a whole GRPO group); logged so the key always exists
            stats[metric_key(name, "accuracy")] = step_agree / step_total if step_total > 0 else math.nan
            if decisions >= self.quality.min_decisions and step_total > 0:
                state.agree = self.quality.ema * state.agree + step_agree
                state.total = self.quality.ema * state.total + step_total
                if name != POOLED:
                    self._count_near_chance(name, state)
            stats[metric_key(name, "accuracy_ema")] = math.nan if state.smoothed is None else state.smoothed
            if name != POOLED:
                stats[metric_key(name, "near_chance_steps")] = float(state.near_chance)
        if self.adaptive.enabled:
            for name, factor in zip(CHANNELS, self.factors()):
                if name in self.channels:
                    stats[metric_key(name, "adaptive_factor")] = factor
        self.last = stats
        return stats

    def _count_near_chance(self, name: str, state: _State) -> None:
        band = self.quality.chance_band
        if abs(state.smoothed - CHANCE) > band:
            state.near_chance = 0
            return
        state.near_chance += 1
        if state.near_chance == self.quality.warn_after_steps:  # once per spell: the count only passes this value once
            logger.warning(
                "AReW: the %s critiques have agreed with the advantages' direction no better than chance for %d steps "
                "(smoothed accuracy %.3f, within 0.5 +- algorithm.arew.quality.chance_band=%g): they add noise to the "
                "advantages (Prop. 4.1), unless the outcome does not depend on them yet (AS while belief tracking is weak, "
                "low episode/proxy_c_bt). Check the %s critique source, or lower its strength (algorithm.arew.lam%s), drop it "
                "(algorithm.arew.channels) or set algorithm.arew.adaptive.enabled=true",
                name.upper(), state.near_chance, state.smoothed, band, name.upper(),
                f" / lam_{name}" if self.grouping == "separate" else "",
            )

    def factors(self) -> tuple[float, ...]:
        """The multiplier on each channel's lambda (``CHANNELS`` order): 1 when adaptive is off or warming up.

        The warm-up (``adaptive.warmup_steps``) is there because the estimate measures agreement with
        the learner's own credit assignment, which is what self-locking breaks: at the start the
        outcome does not depend on AS and an untrained critic can score good critiques below
        chance, so without it the factor switches off the critiques that would break the lock
        (the PE lab: PPO with clean critiques stays locked, 0.18 against 0.86 with fixed lambda).

        ``grouping=pooled`` shares one P/N set across the channels, so both get the factor of the
        pooled accuracy: a per-channel factor would unbalance the set's zero sum, and the pooled
        update's gain is the W-weighted sum of the channels' (2 Acc - 1), i.e. that of the pooled
        accuracy. ``separate``: each channel its own.
        """
        if not self.adaptive.enabled or self.step <= self.adaptive.warmup_steps:
            return tuple(1.0 for _ in CHANNELS)
        if self.grouping == "pooled":
            shared = adaptive_factor(self.states[POOLED].smoothed, self.adaptive.full_at)
            return tuple(shared for _ in CHANNELS)
        return tuple(adaptive_factor(self.states[name].smoothed, self.adaptive.full_at) for name in CHANNELS)

