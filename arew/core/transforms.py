"""Critique transforms for the paper's robustness studies (SPEC section 1).

Applied in a fixed order to the batch's labels, before they become coefficients:
window (keep the first/last fraction of each trajectory's decisions, fill the rest),
channel selection, random sign flips (alpha), and negative-to-positive flips (p).
Randomness comes from a generator seeded by (noise.seed, global step), one draw per decision
made in the samples' noise order (``Segments.noise_order``), so a run is reproducible and a
resumed run gives the same samples the same noise at the same step.
"""

from __future__ import annotations

from collections.abc import Callable

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


def decision_uniforms(segments: Segments, generator: torch.Generator) -> torch.Tensor:
    """One uniform per decision; with a noise order, decision k of the j-th sample in that order gets draw k of it."""
    draws = torch.rand(segments.label.shape, generator=generator)
    if segments.noise_order is None or draws.numel() == 0:
        return draws
    canonical = segments.noise_order[segments.sample] * (int(segments.count.max()) + 1) + segments.rank
    uniforms = torch.empty_like(draws)
    uniforms[torch.argsort(canonical)] = draws
    return uniforms


def flip_signs(label: torch.Tensor, prob: float, uniforms: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Flip each non-zero critique's sign with probability ``prob`` (Table 2's alpha)."""
    if prob == 0.0:
        return label
    flip = uniforms() < prob
    return torch.where(flip, -label, label)


def negatives_to_positive(label: torch.Tensor, prob: float, uniforms: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Turn each -1 into +1 with probability ``prob`` (Table 4's false positives)."""
    if prob == 0.0:
        return label
    flip = (uniforms() < prob) & (label == -1)
    return torch.where(flip, torch.ones_like(label), label)


def transform_labels(segments: Segments, config: AReWConfig, step: int) -> torch.Tensor:
    """The labels the coefficients are built from, after every configured transform."""
    label = apply_window(segments, config.window.keep, config.window.fraction, config.window.fill)
    label = select_channels(label, segments.channel, config.enabled_channels)
    generator = step_generator(config.noise.seed, step)
    uniforms = lambda: decision_uniforms(segments, generator)  # noqa: E731  (drawn only for a non-zero probability)
    label = flip_signs(label, config.noise.flip_prob, uniforms)
    return negatives_to_positive(label, config.noise.neg_to_pos_prob, uniforms)
