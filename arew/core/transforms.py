"""Critique transforms for the paper's robustness studies (SPEC section 1).

Applied in a fixed order to the batch's labels, before they become coefficients:
window (keep the first/last fraction of each trajectory's decisions, fill the rest),
channel selection, random sign flips (alpha), and negative-to-positive flips (p).
Randomness comes from a generator seeded by (noise.seed, global step), so a run is
reproducible and a resumed run draws the same noise for the same step.
"""

from __future__ import annotations

import torch

from arew.core.config import AReWConfig
from arew.core.records import CHANNEL_INDEX, Segments


def step_generator(seed: int, step: int) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed((int(seed) * 1_000_003 + int(step)) % (2**63 - 1))
    return generator


def apply_window(segments: Segments, keep: str, fraction: float, fill: int) -> torch.Tensor:
    """Keep the first or last ``ceil(fraction * n)`` decisions' labels of each trajectory; set the rest to ``fill``."""
    label = segments.label
    if keep == "all":
        return label
    n = segments.count
    kept = torch.ceil(fraction * n.double()).long()
    rank = segments.rank
    inside = rank < kept if keep == "first" else rank >= n - kept
    return torch.where(inside, label, torch.full_like(label, fill))


def select_channels(label: torch.Tensor, channel: torch.Tensor, enabled: tuple[str, ...]) -> torch.Tensor:
    on = torch.zeros_like(label, dtype=torch.bool)
    for name in enabled:
        on |= channel == CHANNEL_INDEX[name]
    return torch.where(on, label, torch.zeros_like(label))


def flip_signs(label: torch.Tensor, prob: float, generator: torch.Generator) -> torch.Tensor:
    """Flip each non-zero critique's sign with probability ``prob`` (Table 2's alpha)."""
    if prob == 0.0:
        return label
    flip = torch.rand(label.shape, generator=generator) < prob
    return torch.where(flip, -label, label)


def negatives_to_positive(label: torch.Tensor, prob: float, generator: torch.Generator) -> torch.Tensor:
    """Turn each -1 into +1 with probability ``prob`` (Table 4's false positives)."""
    if prob == 0.0:
        return label
    flip = (torch.rand(label.shape, generator=generator) < prob) & (label == -1)
    return torch.where(flip, torch.ones_like(label), label)


def transform_labels(segments: Segments, config: AReWConfig, step: int) -> torch.Tensor:
    """The labels the coefficients are built from, after every configured transform."""
    label = apply_window(segments, config.window.keep, config.window.fraction, config.window.fill)
    label = select_channels(label, segments.channel, config.enabled_channels)
    generator = step_generator(config.noise.seed, step)
    label = flip_signs(label, config.noise.flip_prob, generator)
    return negatives_to_positive(label, config.noise.neg_to_pos_prob, generator)
