"""Critique statistics for the step log (all keys under ``arew/``)."""

from __future__ import annotations

import torch

from arew.core.coefficients import group_ids
from arew.core.records import CHANNEL_INDEX, Segments


def critique_stats(
    segments: Segments,
    label: torch.Tensor,
    token_counts: torch.Tensor,
    response_mask: torch.Tensor,
    grouping: str,
) -> dict[str, float]:
    """Counts of +/0/- per channel, two-sided trajectories and the +/- token balance."""
    stats: dict[str, float] = {
        "arew/records_dropped": float(segments.dropped_samples),
        "arew/samples_without_records": float(segments.samples_without_records),
        "arew/decisions": float(len(label)),
    }
    batch = max(segments.batch_size, 1)
    for name, index in CHANNEL_INDEX.items():
        in_channel = segments.channel == index
        for sign, value in (("pos", 1), ("zero", 0), ("neg", -1)):
            stats[f"arew/{name}/{sign}"] = float((in_channel & (label == value)).sum())
        raw_changed = in_channel & (label != segments.label)
        stats[f"arew/{name}/changed_by_transforms"] = float(raw_changed.sum())
        stats[f"arew/{name}/both_signs_frac"] = _two_sided_share(
            segments.sample[in_channel], label[in_channel], segments.batch_size
        )
    groups, num_groups = group_ids(segments, grouping)
    pos = torch.zeros(num_groups, dtype=torch.bool).index_fill_(0, groups[label == 1], True)
    neg = torch.zeros(num_groups, dtype=torch.bool).index_fill_(0, groups[label == -1], True)
    active_decision = (pos & neg)[groups]
    active_samples = torch.zeros(segments.batch_size, dtype=torch.bool)
    active_samples.index_fill_(0, segments.sample[active_decision], True)
    stats["arew/both_signs_frac"] = float(active_samples.sum()) / batch
    pos_tokens = float(token_counts[label == 1].sum())
    neg_tokens = float(token_counts[label == -1].sum())
    stats["arew/pos_tokens"] = pos_tokens
    stats["arew/neg_tokens"] = neg_tokens
    if neg_tokens > 0:
        stats["arew/pos_neg_token_ratio"] = pos_tokens / neg_tokens
    stats["arew/critiqued_token_frac"] = (pos_tokens + neg_tokens) / max(float(response_mask.sum()), 1.0)
    return stats


def _two_sided_share(sample: torch.Tensor, label: torch.Tensor, batch_size: int) -> float:
    pos = torch.zeros(batch_size, dtype=torch.bool).index_fill_(0, sample[label == 1], True)
    neg = torch.zeros(batch_size, dtype=torch.bool).index_fill_(0, sample[label == -1], True)
    return float((pos & neg).sum()) / max(batch_size, 1)
