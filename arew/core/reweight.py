"""The two ways of injecting critiques, on padded (B, L) tensors.

* :func:`reweight_advantages` is AReW: A_hat = A + lambda * u_t on the model tokens of each
  decision, applied after the base estimator's normalisation; returns are left alone.
* :func:`add_intermediate_rewards` is the Appendix A.2 baseline: alpha * z_t added to the
  reward at the last model token of each decision, before the base estimator, so returns
  and critic targets change.

Both read the same transformed critiques and scale by the same schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from arew.core.coefficients import decision_coefficients, last_model_token, model_token_counts, spread_over_spans
from arew.core.config import AReWConfig
from arew.core.records import Segments
from arew.core.schedule import schedule_factor
from arew.core.stats import critique_stats
from arew.core.transforms import transform_labels


@dataclass(frozen=True)
class _Prepared:
    label: torch.Tensor
    model_mask: torch.Tensor
    token_counts: torch.Tensor
    factor: float
    stats: dict[str, float]


def _prepare(segments: Segments, response_mask: torch.Tensor, config: AReWConfig, step: int) -> _Prepared:
    if response_mask.shape[0] != segments.batch_size:
        raise ValueError(
            f"response_mask has {response_mask.shape[0]} rows but the critique records describe {segments.batch_size} samples"
        )
    model_mask = (response_mask.cpu() > 0).float()
    label = transform_labels(segments, config, step)
    token_counts = model_token_counts(segments, model_mask)
    factor = schedule_factor(config.schedule, step)
    stats = critique_stats(segments, label, token_counts, model_mask, config.grouping)
    stats["arew/strength_factor"] = factor
    return _Prepared(label, model_mask, token_counts, factor, stats)


def reweight_advantages(
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    segments: Segments,
    config: AReWConfig,
    step: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return (A + lambda * u, statistics). ``advantages`` is not modified in place."""
    prep = _prepare(segments, response_mask, config, step)
    lambdas = tuple(prep.factor * lam for lam in config.channel_lambdas())
    per_decision = decision_coefficients(
        prep.label, segments, config.grouping, config.weighting, lambdas, prep.token_counts
    )
    per_token = spread_over_spans(per_decision, segments, prep.model_mask)
    stats = prep.stats
    stats["arew/abs_coef_per_token"] = float((per_decision.abs() * prep.token_counts).sum()) / max(
        float(prep.model_mask.sum()), 1.0
    )
    stats["arew/abs_coef_per_traj"] = float(per_decision.abs().sum() / max(segments.batch_size, 1))
    return advantages + per_token.to(device=advantages.device, dtype=advantages.dtype), stats


def add_intermediate_rewards(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    segments: Segments,
    config: AReWConfig,
    step: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return (rewards + alpha * z at each decision's last model token, statistics)."""
    prep = _prepare(segments, response_mask, config, step)
    last = last_model_token(segments, prep.model_mask)
    placed = last >= 0
    bonus = (config.reward_coef * prep.factor) * prep.label[placed].double()
    shaped = torch.zeros(prep.model_mask.shape, dtype=torch.float64)
    shaped.index_put_((segments.sample[placed], last[placed]), bonus, accumulate=True)
    stats = prep.stats
    stats["arew/intermediate_reward_per_traj"] = float(bonus.sum() / max(segments.batch_size, 1))
    stats["arew/decisions_without_model_tokens"] = float((~placed).sum())
    shaped = shaped.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype)
    return token_level_rewards + shaped, stats
