"""A realistic multi-turn batch in torch alone, for the benchmarks that time the advantage stage (with verl:
``advantage_stage.py``; without it, on any device: ``gpu_check.py``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from arew.core import make_record
from arew.core.synact import DecisionKeys

ROLLOUTS_PER_PROMPT = 4


@dataclass
class MultiTurnBatch:
    """``response_mask`` (model tokens 1, environment tokens 0 between decisions), one reward on each sample's last
    model token, random critic values on the model tokens, the critique records and the prompt group of each sample."""

    response_mask: torch.Tensor
    token_level_rewards: torch.Tensor
    values: torch.Tensor
    records: list[dict]
    groups: np.ndarray


def multi_turn_batch(batch: int, length: int, seed: int = 0) -> MultiTurnBatch:
    """10-20 decisions per trajectory, random spans and labels, rewards 0/1; ``seed`` fixes everything."""
    rng = random.Random(seed)
    mask = torch.zeros(batch, length)
    records = []
    for i in range(batch):
        turns = rng.randint(10, 20)
        bounds = sorted(rng.sample(range(1, length), 2 * turns))
        spans = [(bounds[2 * k], bounds[2 * k + 1]) for k in range(turns)]
        for start, end in spans:
            mask[i, start:end] = 1  # model tokens; the gaps are environment/user tokens
        labels = [rng.choice([-1, 0, 1]) for _ in spans]
        records.append(make_record(spans, ["as", "bt"] * (turns // 2) + ["as"] * (turns % 2), labels))
    rewards = torch.zeros(batch, length)
    last = length - 1 - mask.flip(1).argmax(1)
    rewards[torch.arange(batch), last] = torch.randint(0, 2, (batch,), generator=torch.Generator().manual_seed(seed)).float()
    values = torch.randn(batch, length, generator=torch.Generator().manual_seed(seed + 1)) * mask
    return MultiTurnBatch(mask, rewards, values, records, np.arange(batch) // ROLLOUTS_PER_PROMPT)


def decision_keys(records: list[dict], group: int = ROLLOUTS_PER_PROMPT) -> DecisionKeys:
    """Keys in which the first two decisions of the ``group`` rollouts of a prompt share states, the others do not."""
    state, action = [], []
    for i, record in enumerate(records):
        for rank in range(len(record["start"])):
            state.append(hash((i // group, rank)) if rank < 2 else hash((i, rank)))
            action.append(rank)
    return DecisionKeys(np.array(state, dtype=np.int64), np.array(action, dtype=np.int64), np.ones(len(state), dtype=bool))
