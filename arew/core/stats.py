"""Critique statistics for the step log (all keys under ``arew/``), from a few bincounts over decisions."""

from __future__ import annotations

import torch

from arew.core.records import CHANNELS, Segments


def critique_stats(
    segments: Segments,
    label: torch.Tensor,
    token_counts: torch.Tensor,
    model_tokens: float,
    grouping: str,
) -> dict[str, float]:
    """Counts of +/0/- per channel, two-sided trajectories and the +/- token balance.

    ``model_tokens`` is the number of policy tokens in the batch.
    """
    num_channels = len(CHANNELS)
    batch = max(segments.batch_size, 1)
    channel = segments.channel
    # one bincount over (trajectory, channel, sign): sign columns -1, 0, +1 (labels are always one of them)
    code = (segments.sample * num_channels + channel) * 3 + (label + 1)
    per_pair = torch.bincount(code, minlength=segments.batch_size * num_channels * 3).view(-1, num_channels, 3)
    by_sign = per_pair.sum(dim=0).tolist()
    changed = torch.bincount(channel.masked_select(label != segments.label), minlength=num_channels).tolist()
    # which (trajectory, channel) pairs hold a positive and which a negative critique
    has_neg, has_pos = per_pair[:, :, 0] > 0, per_pair[:, :, 2] > 0
    two_sided = has_pos & has_neg
    # a trajectory is active when one of its P/N sets has both signs
    active = has_pos.any(dim=1) & has_neg.any(dim=1) if grouping == "pooled" else two_sided.any(dim=1)
    neg_tokens, _, pos_tokens = torch.bincount(label + 1, weights=token_counts.double(), minlength=3).tolist()
    two_sided_per_channel = two_sided.sum(dim=0).tolist()

    stats: dict[str, float] = {
        "arew/records_dropped": float(segments.dropped_samples),
        "arew/samples_without_records": float(segments.samples_without_records),
        "arew/decisions": float(len(label)),
    }
    for index, name in enumerate(CHANNELS):
        neg, zero, pos = by_sign[index]
        stats[f"arew/{name}/pos"] = float(pos)
        stats[f"arew/{name}/zero"] = float(zero)
        stats[f"arew/{name}/neg"] = float(neg)
        stats[f"arew/{name}/changed_by_transforms"] = float(changed[index])
        stats[f"arew/{name}/both_signs_frac"] = two_sided_per_channel[index] / batch
    stats["arew/both_signs_frac"] = int(active.sum()) / batch
    stats["arew/pos_tokens"] = pos_tokens
    stats["arew/neg_tokens"] = neg_tokens
    if neg_tokens > 0:
        stats["arew/pos_neg_token_ratio"] = pos_tokens / neg_tokens
    stats["arew/critiqued_token_frac"] = (pos_tokens + neg_tokens) / max(model_tokens, 1.0)
    return stats
