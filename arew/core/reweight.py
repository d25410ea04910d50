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

from arew.core.coefficients import decision_coefficients, last_model_token, model_mask_of, paint_spans, span_totals
from arew.core.config import AReWConfig
from arew.core.records import Segments
from arew.core.schedule import schedule_factor
from arew.core.stats import critique_stats
from arew.core.transforms import transform_labels


@dataclass(frozen=True)
class _Prepared:
    label: torch.Tensor
    token_counts: torch.Tensor
    model_tokens: float
    factor: float
    stats: dict[str, float]
    workspace: torch.Tensor  # (B, L) float32 CPU buffer free for reuse (it held the mask's prefix sums)


def _prepare(segments: Segments, response_mask: torch.Tensor, config: AReWConfig, step: int) -> _Prepared:
    if response_mask.shape[0] != segments.batch_size:
        raise ValueError(
            f"response_mask has {response_mask.shape[0]} rows but the critique records describe {segments.batch_size} samples"
        )
    label = transform_labels(segments, config, step)
    workspace = model_mask_of(response_mask)
    token_counts, model_tokens = span_totals(segments, workspace.cumsum_(dim=1))
    factor = schedule_factor(config.schedule, step)
    stats = critique_stats(segments, label, token_counts, model_tokens, config.grouping)
    stats["arew/strength_factor"] = factor
    return _Prepared(label, token_counts, model_tokens, factor, stats, workspace)


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
    magnitude = per_decision.abs()
    stats = prep.stats
    stats["arew/abs_coef_per_token"] = float((magnitude * prep.token_counts).sum()) / max(prep.model_tokens, 1.0)
    stats["arew/abs_coef_per_traj"] = float(magnitude.sum()) / max(segments.batch_size, 1)
    return _add_on_model_tokens(advantages, per_decision, segments, response_mask, prep), stats


def _add_on_model_tokens(
    advantages: torch.Tensor, per_decision: torch.Tensor, segments: Segments, response_mask: torch.Tensor, prep: _Prepared
) -> torch.Tensor:
    """A + each decision's coefficient on the model tokens of its span, with as few (B, L) buffers as possible.

    The coefficients are painted into the prepared workspace, and for float32 CPU advantages
    the sum is written over them. When every span holds model tokens only (the usual case)
    the painted spans need no mask; otherwise the mask is rebuilt in a buffer of its own.
    """
    if not bool(per_decision.any()):
        return advantages
    spans_hold_model_tokens_only = torch.equal(prep.token_counts, segments.end - segments.start)
    values = paint_spans(per_decision, segments, out=prep.workspace)
    if advantages.dtype == torch.float32 and advantages.device.type == "cpu":
        out = values  # the sum overwrites the painted coefficients
    else:
        values, out = values.to(device=advantages.device, dtype=advantages.dtype), None
    if spans_hold_model_tokens_only:
        return torch.add(advantages, values, out=out)
    model_mask = model_mask_of(response_mask).to(device=values.device, dtype=values.dtype)
    return torch.addcmul(advantages, values, model_mask, out=out)


def add_intermediate_rewards(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    segments: Segments,
    config: AReWConfig,
    step: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return (rewards + alpha * z at each decision's last model token, statistics)."""
    prep = _prepare(segments, response_mask, config, step)
    last = last_model_token(segments, model_mask_of(response_mask, out=prep.workspace))
    placed = last >= 0
    bonus = (config.reward_coef * prep.factor) * prep.label[placed].double()
    shaped = torch.zeros(prep.workspace.shape, dtype=torch.float64)
    shaped.index_put_((segments.sample[placed], last[placed]), bonus, accumulate=True)
    stats = prep.stats
    stats["arew/intermediate_reward_per_traj"] = float(bonus.sum() / max(segments.batch_size, 1))
    stats["arew/decisions_without_model_tokens"] = float((~placed).sum())
    shaped = shaped.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype)
    return token_level_rewards + shaped, stats
