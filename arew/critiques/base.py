"""What a critique source sees of an episode, what it answers, and how its answer meets the rules'.

A source labels every decision of a finished episode at once (:meth:`CritiqueSource.critique`):
one :class:`SourceCritique` per decision, in order. It sees the task, the dataset row, the
opening messages and, per decision, the agent's text, its channel, the environment's reply and
the environment's own critique (``rule``), so a source may judge from the text alone (a judge
model), from the task's data (interface contracts) or from the rule (a simulated judge).

A critique with ``label=None`` is no critique: the source could not say (a failed request, an
unparseable reply, a decision it does not cover). :func:`combine` then treats it by
``on_missing``; the count goes to the episode's metrics. ``combine`` modes:

- ``replace``: the source's label, whatever the rule said;
- ``fill``: the rule's label where it is not 0, else the source's;
- ``agree``: the rule's label where the source gives the same one, else 0.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

LABELS = (-1, 0, 1)
COMBINE_MODES = ("replace", "fill", "agree")
MISSING_POLICIES = ("rule", "zero")


@dataclass(frozen=True)
class Decision:
    """One decision of the episode: the agent's text, its channel ("as"/"bt"), the environment's
    message after it (None: none followed) and the environment's critique of it."""

    text: str
    channel: str
    reply: str | None
    rule: int


@dataclass(frozen=True)
class EpisodeContext:
    """A finished episode as a critique source sees it."""

    task: str
    row: Mapping[str, Any]  # the dataset row's extra_info (the task's data)
    messages: tuple[Mapping[str, str], ...]  # the opening messages (system, first user message)
    decisions: tuple[Decision, ...]
    name: str = ""  # split:row:session (arew.episodes.episode_name): stable across runs


@dataclass(frozen=True)
class SourceCritique:
    """A source's critique of one decision; ``label=None``: none (``reason`` says why)."""

    label: int | None
    reason: str = ""
    cached: bool = False  # answered from the source's cache, no work done

    def __post_init__(self) -> None:
        if self.label is not None and self.label not in LABELS:
            raise ValueError(f"a critique label is one of {LABELS} or None, got {self.label!r}")


class CritiqueSource(abc.ABC):
    """A source of critiques, built per episode from its parsed ``CONFIG`` (the ``arew_agent.critiques.options``).

    ``stats`` holds the episode's counts the source wants logged (requests, failures, seconds);
    they reach the trainer's metrics as ``episode/critique_<name>/mean``.
    """

    # a frozen dataclass declared with arew.schema settings: the source's options, checked at start-up
    CONFIG: ClassVar[type]

    def __init__(self, config: Any, task: str):
        self.config = config
        self.task = task
        self.stats: dict[str, float] = {}

    @classmethod
    def check_task(cls, task: str) -> str | None:
        """Why this source cannot critique ``task`` (checked at start-up), or None."""
        return None

    @abc.abstractmethod
    async def critique(self, episode: EpisodeContext) -> list[SourceCritique]:
        """One critique per decision of ``episode``, in order; never raises for bad model output."""

    def count(self, name: str, n: float = 1.0) -> None:
        self.stats[name] = self.stats.get(name, 0.0) + n


@dataclass(frozen=True)
class Combined:
    """The labels training uses, each source's own (None as 0), the source's reasons, and the episode's counts."""

    labels: list[int]
    by_source: dict[str, list[int]]
    reasons: list[str] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)


def combine(rule: Sequence[int], critiques: Sequence[SourceCritique], mode: str, on_missing: str) -> list[int]:
    """The label of each decision from the rule's and the source's (module docstring)."""
    if mode not in COMBINE_MODES:
        raise ValueError(f"combine: must be one of {list(COMBINE_MODES)}, got {mode!r}")
    if on_missing not in MISSING_POLICIES:
        raise ValueError(f"on_missing: must be one of {list(MISSING_POLICIES)}, got {on_missing!r}")
    if len(rule) != len(critiques):
        raise ValueError(f"the source gave {len(critiques)} critiques for {len(rule)} decisions")
    labels = []
    for r, critique in zip(rule, critiques):
        s = critique.label
        if s is None:
            s = r if on_missing == "rule" else 0
        if mode == "replace":
            labels.append(s)
        elif mode == "fill":
            labels.append(r if r != 0 else s)
        else:
            labels.append(r if r == s else 0)
    return labels
