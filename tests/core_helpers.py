"""What the core tests share: random batches (hypothesis) and the boundary between the vectorised paths'
tensors and the plain-Python reference (:mod:`arew.core.reference`). Importable as ``core_helpers`` from any
test module (pyproject's ``pythonpath = ["tests"]``)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from arew.core import collect_segments, make_record
from arew.core import reference as ref
from arew.core.records import CHANNELS, Segments


def trajectories(segments: Segments, mask: torch.Tensor) -> list[ref.Trajectory]:
    """The reference's view of a batch: each sample's decisions and which response tokens the policy wrote."""
    policy = (mask > 0).tolist()
    decisions: list[list[ref.Decision]] = [[] for _ in range(segments.batch_size)]
    for b, start, end, channel, label in zip(
        *(getattr(segments, name).tolist() for name in ("sample", "start", "end", "channel", "label"))
    ):
        decisions[b].append(ref.Decision(start, end, CHANNELS[channel], label))
    return [ref.Trajectory(tuple(row), tuple(flags)) for row, flags in zip(decisions, policy)]


def draw_order(segments: Segments) -> list[int] | None:
    """The samples in the order critique noise is drawn for them (None: batch order)."""
    if segments.noise_order is None:
        return None
    return sorted(range(segments.batch_size), key=lambda i: int(segments.noise_order[i]))


def per_decision(segments: Segments, values: torch.Tensor) -> list[list]:
    """A (K,) tensor as the reference's per-trajectory lists."""
    out: list[list] = [[] for _ in range(segments.batch_size)]
    for b, value in zip(segments.sample.tolist(), values.tolist()):
        out[b].append(value)
    return out


def flat(rows) -> list:
    """Per-trajectory lists as one list in decision order (the vectorised paths' (K,) order)."""
    return [value for row in rows for value in row]


def token_counts(segments: Segments, mask: torch.Tensor) -> torch.Tensor:
    """(K,) long: each decision's policy tokens, by the reference."""
    return torch.tensor(flat(ref.policy_token_counts(trajectories(segments, mask))), dtype=torch.long)


@st.composite
def batches(draw, max_batch: int = 5, max_length: int = 30, odd_masks: bool = True, noise_keys: bool = False):
    """(segments, mask): spans that often touch, also across rows and at the row's ends; masks with odd values
    (NaN, negative, 2.5: only > 0 is a policy token), sometimes 1 on every span token; samples without records."""
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(1, max_length))
    spans_are_policy_tokens = draw(st.booleans())
    values = [0.0, 1.0, 1.0, 2.5, -1.0, float("nan")] if odd_masks else [0.0, 1.0, 1.0]
    records, mask = [], []
    for _ in range(batch):
        cuts = sorted(draw(st.sets(st.integers(0, length), max_size=10)) | ({0, length} if draw(st.booleans()) else set()))
        spans = [(a, b) for a, b in zip(cuts, cuts[1:]) if draw(st.integers(0, 3))]
        labels = [draw(st.sampled_from([-1, 0, 0, 1])) for _ in spans]
        channels = [draw(st.sampled_from(CHANNELS)) for _ in spans]
        records.append(make_record(spans, channels, labels) if spans or draw(st.booleans()) else None)
        row = [draw(st.sampled_from(values)) for _ in range(length)]
        for start, end in spans if spans_are_policy_tokens else []:
            row[start:end] = [1.0] * (end - start)
        mask.append(row)
    keys = None
    if noise_keys and draw(st.booleans()):
        keys = draw(st.lists(st.text("abc", max_size=3), min_size=batch, max_size=batch))
    return collect_segments(records, [length] * batch, noise_keys=keys), torch.tensor(mask)


def dyadic_advantages(seed: int, shape, dtype=torch.float32) -> torch.Tensor:
    """Multiples of 1/8 in [-4, 4]: any sum of a row's values is exact, in any order (the vectorised span
    means sum in NumPy's pairwise order, the reference from left to right)."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(-32, 33, shape, generator=generator) / 8).to(dtype)
