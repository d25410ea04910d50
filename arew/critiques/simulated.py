"""A judge of known accuracy, simulated from the environment's rules: the lab's and the studies' stand-in for a
judge model, to measure how AReW behaves as a judge's accuracy falls (the paper's Prop. 4.1).

Each decision gets the rule's label with probability ``accuracy``; otherwise the judge errs: a +1 or -1 of
the rule becomes its opposite, and a 0 (nothing to say) becomes +1 or -1 with equal odds (a judge sees a
direction where there is none). The rule is the truth here, so ``accuracy`` is exactly the share of
labels that equal the truth.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import torch

from arew.critiques.base import CritiqueSource, EpisodeContext, SourceCritique
from arew.schema import setting


def simulated_judge_labels(reference: torch.Tensor, accuracy: float, generator: torch.Generator) -> torch.Tensor:
    """Labels of a judge that equals ``reference`` (integers in {-1, 0, 1}, any shape) with probability ``accuracy``."""
    wrong = torch.rand(reference.shape, generator=generator) >= accuracy
    coin = torch.where(torch.rand(reference.shape, generator=generator) < 0.5, -1, 1).to(reference.dtype)
    error = torch.where(reference == 0, coin, -reference)
    return torch.where(wrong, error, reference)


@dataclass(frozen=True)
class SimulatedJudgeConfig:
    """The ``simulated`` source's options."""

    accuracy: float = setting(0.8, "Probability that a label equals the rule's (errors: the opposite sign, or +-1 for a 0)", low=0, high=1)
    seed: int = setting(0, "Seed of the errors; with the episode's name it fixes each episode's labels across runs")


class SimulatedJudge(CritiqueSource):
    """The ``simulated`` source (module docstring)."""

    CONFIG = SimulatedJudgeConfig

    async def critique(self, episode: EpisodeContext) -> list[SourceCritique]:
        generator = torch.Generator().manual_seed(zlib.crc32(f"{self.config.seed}:{episode.name}".encode()))
        reference = torch.tensor([decision.rule for decision in episode.decisions], dtype=torch.long)
        labels = simulated_judge_labels(reference, self.config.accuracy, generator)
        return [SourceCritique(int(z), "simulated") for z in labels]
