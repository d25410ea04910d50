"""Critiques to per-token coefficients: the paper's u_t (Eq. 1) and the reference's token balancing.

Everything is computed per decision (K of them in a batch) with scatter operations and then
spread over the decisions' tokens with one cumulative sum, so no Python loop touches tokens
or samples. ``model_mask`` is the response mask as float32 (1 on policy tokens).
"""

from __future__ import annotations

import torch

from arew.core.records import CHANNELS, Segments


def model_token_counts(segments: Segments, model_mask: torch.Tensor) -> torch.Tensor:
    """Number of policy-generated tokens inside each decision's span, from one prefix sum."""
    prefix = model_mask.cumsum(dim=1)
    upto_end = prefix[segments.sample, segments.end - 1]
    before_start = torch.where(
        segments.start > 0, prefix[segments.sample, (segments.start - 1).clamp(min=0)], torch.zeros_like(upto_end)
    )
    return (upto_end - before_start).round().long()


def group_ids(segments: Segments, grouping: str) -> tuple[torch.Tensor, int]:
    """Which P/N set each decision belongs to: its trajectory (pooled) or trajectory x channel."""
    if grouping == "pooled":
        return segments.sample, segments.batch_size
    return segments.sample * len(CHANNELS) + segments.channel, segments.batch_size * len(CHANNELS)


def _group_sum(values: torch.Tensor, groups: torch.Tensor, num_groups: int) -> torch.Tensor:
    return torch.zeros(num_groups, dtype=values.dtype).index_add_(0, groups, values)


def decision_coefficients(
    label: torch.Tensor,
    segments: Segments,
    grouping: str,
    weighting: str,
    lambdas: tuple[float, ...],
    token_counts: torch.Tensor,
) -> torch.Tensor:
    """lambda * u for every decision (K,), zero in groups that lack either sign.

    per_step: u = +1/|P| on positive decisions, -1/|N| on negative ones (the paper's rule).
    minority_fixed: with T+ and T- the numbers of model tokens under positive and negative
    decisions, each positive token gets +lambda * min(T+, T-) / T+ and each negative token
    -lambda * min(T+, T-) / T-, so the token sum is zero and the smaller side gets exactly
    +-lambda per token (the reference code's published scales).
    """
    groups, num_groups = group_ids(segments, grouping)
    pos = (label == 1).double()
    neg = (label == -1).double()
    if weighting == "per_step":
        pos_mass = _group_sum(pos, groups, num_groups)
        neg_mass = _group_sum(neg, groups, num_groups)
        pos_unit = 1.0 / pos_mass.clamp(min=1.0)
        neg_unit = 1.0 / neg_mass.clamp(min=1.0)
    else:
        tokens = token_counts.double()
        pos_mass = _group_sum(pos * tokens, groups, num_groups)
        neg_mass = _group_sum(neg * tokens, groups, num_groups)
        minority = torch.minimum(pos_mass, neg_mass)
        pos_unit = minority / pos_mass.clamp(min=1.0)
        neg_unit = minority / neg_mass.clamp(min=1.0)
    active = (pos_mass > 0) & (neg_mass > 0)
    strength = torch.tensor(lambdas, dtype=torch.float64)[segments.channel]
    u = pos * pos_unit[groups] - neg * neg_unit[groups]
    return torch.where(active[groups], strength * u, torch.zeros_like(u))


def spread_over_spans(per_decision: torch.Tensor, segments: Segments, model_mask: torch.Tensor) -> torch.Tensor:
    """(B, L) tensor with each decision's value on its model tokens and exactly 0 everywhere else.

    A difference array (+value at each span start, -value at its end) and one cumulative sum
    paint the spans (they never overlap; the validator enforces it). Where two spans touch,
    float rounding can leave a residue after them, so a second difference array of +-1 (exact)
    marks the tokens inside spans, and everything else, environment tokens included, is zeroed.
    """
    batch, length = model_mask.shape
    values = per_decision.to(model_mask.dtype)
    painted = torch.zeros(batch, length + 1, dtype=model_mask.dtype)
    painted.index_put_((segments.sample, segments.start), values, accumulate=True)
    painted.index_put_((segments.sample, segments.end), -values, accumulate=True)
    ones = torch.ones_like(values)
    covered = torch.zeros_like(painted)  # +-1 sums of small integers are exact in float
    covered.index_put_((segments.sample, segments.start), ones, accumulate=True)
    covered.index_put_((segments.sample, segments.end), -ones, accumulate=True)
    inside = covered.cumsum_(dim=1)[:, :length]  # exactly 1 inside a span, 0 outside
    return painted.cumsum_(dim=1)[:, :length] * inside * model_mask


def last_model_token(segments: Segments, model_mask: torch.Tensor) -> torch.Tensor:
    """Position of each decision's last policy token, or -1 when its span holds none."""
    positions = torch.arange(1, model_mask.shape[1] + 1, dtype=torch.long)
    latest = (positions * (model_mask > 0)).cummax(dim=1).values - 1  # last model token at or before p
    last = latest[segments.sample, segments.end - 1]
    return torch.where(last >= segments.start, last, torch.full_like(last, -1))
