"""What ``arew eval`` asks of a model: one chat completion at a time (backends: an endpoint, a local folder)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class GenerationParams:
    """Sampling settings of one turn; ``temperature=0`` is greedy."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True)
class Completion:
    """One turn's text (up to and including the stop string that ended it, as verl's engines return it)
    and, where the backend knows them, its token counts."""

    text: str
    finish_reason: str = "stop"  # "stop" or "length"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class GenerationError(Exception):
    """No usable completion after the backend's retries (the episode fails with reason ``generation``)."""


class ChatModel(Protocol):
    name: str

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        """The assistant's next message after ``messages``; raises :class:`GenerationError` when none came."""
