"""Critique transforms for the paper's robustness studies (docs/method.md §5).

Applied in a fixed order to the batch's labels, before they become coefficients:
window (keep the first/last fraction of each trajectory's turns, fill the rest),
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


def turn_index(segments: Segments) -> tuple[torch.Tensor, torch.Tensor]:
    """(1-based turn of each decision, number of turns of its trajectory).

    A turn is an action decision (AS) and the update decisions (BT) that follow it, so the
    final answer, a BT decision, belongs to the last turn; BT decisions before a trajectory's
    first AS decision count toward turn 1. In action-only tasks (tau2) every decision is its
    own turn. Computed from a running count of AS decisions per sample (decisions are sorted
    by sample, then start).
    """
    is_as = (segments.channel == CHANNEL_INDEX["as"]).long()
    as_per_sample = torch.zeros(segments.batch_size, dtype=torch.long).index_add_(0, segments.sample, is_as)
    before = torch.cumsum(as_per_sample, 0) - as_per_sample  # AS decisions of the earlier samples
    turn = (torch.cumsum(is_as, 0) - before.index_select(0, segments.sample)).clamp(min=1)
    n_turns = as_per_sample.clamp(min=1).index_select(0, segments.sample)
    return turn, n_turns


def apply_window(segments: Segments, keep: str, fraction: float, fill: int) -> torch.Tensor:
    """Keep the labels of the first or last ``ceil(fraction * n_turns)`` turns of each trajectory; set the rest to ``fill``.

    Turns as in :func:`turn_index` (the paper's Fig. 8 keeps 40% of the interaction turns'
    critiques): in a 10-turn episode of 21 decisions (10 AS/BT pairs and the final answer),
    ``first`` keeps turns 1-4 (decisions 1-8) and ``last`` turns 7-10 (decisions 13-21).
    ``fill`` replaces every label outside the window, zeros included.
    """
    label = segments.label
    if keep == "all":
        return label
    turn, n_turns = turn_index(segments)
    # the tolerance keeps e.g. 0.3 * 10 = 3.0000000000000004 at 3 turns
    kept = torch.ceil(fraction * n_turns.double() - 1e-9).long()
    inside = turn <= kept if keep == "first" else turn > n_turns - kept
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
