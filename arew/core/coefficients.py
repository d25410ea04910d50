"""Critiques to per-token coefficients: the paper's u_t (Eq. 1) and the reference's token balancing.

Everything is computed per decision (K of them in a batch) with scatter operations and then
broadcast to tokens through an index map, so no Python loop touches tokens or samples.
"""

from __future__ import annotations

import torch

from arew.core.records import CHANNELS, Segments


def segment_index_map(segments: Segments, shape: tuple[int, int]) -> torch.Tensor:
    """(B, L) map holding k + 1 on the tokens of decision k and 0 elsewhere.

    Spans never overlap (the validator enforces it), so +id at each start and -id at each end
    followed by a cumulative sum paints every span with its own id.
    """
    batch, length = shape
    marks = torch.zeros(batch, length + 1, dtype=torch.long)
    ids = torch.arange(1, len(segments.sample) + 1)
    marks.index_put_((segments.sample, segments.start), ids, accumulate=True)
    marks.index_put_((segments.sample, segments.end), -ids, accumulate=True)
    return marks.cumsum(dim=1)[:, :length]


def model_token_counts(segments: Segments, response_mask: torch.Tensor) -> torch.Tensor:
    """Number of policy-generated tokens (response_mask == 1) inside each decision's span."""
    prefix = torch.zeros(response_mask.shape[0], response_mask.shape[1] + 1, dtype=torch.long)
    prefix[:, 1:] = (response_mask > 0).long().cumsum(dim=1)
    return prefix[segments.sample, segments.end] - prefix[segments.sample, segments.start]


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


def broadcast_to_tokens(per_decision: torch.Tensor, index_map: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Place each decision's value on its model tokens; environment tokens and gaps get 0."""
    padded = torch.cat([per_decision.new_zeros(1), per_decision])
    return padded[index_map] * (response_mask > 0)


def last_model_token(segments: Segments, index_map: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Position of each decision's last policy token, or -1 when its span holds none."""
    positions = torch.arange(index_map.shape[1]).expand_as(index_map)
    inside = (index_map > 0) & (response_mask > 0)
    last = torch.full((len(segments.sample) + 1,), -1, dtype=torch.long)
    last.scatter_reduce_(0, index_map[inside], positions[inside], reduce="amax")
    return last[1:]
