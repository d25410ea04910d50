"""The episode driver's transcript on chat messages, for ``arew eval``'s chat models.

The budget is the training loop's (:class:`arew.verl_plugin.agent_loop.AgentLoopSettings`,
``data.max_response_length``), counted in tokens: a turn costs what the backend reports
(``completion_tokens``) or what ``count_tokens`` says of its text, a feedback message what
``count_tokens`` says of it plus :data:`MESSAGE_OVERHEAD` template tokens. With the model's own
tokenizer the counts are within a few template tokens of the training stream's; without one
(an endpoint and no ``--tokenizer``) ``count_tokens`` is :func:`estimate_tokens`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from arew.episodes import EpisodeLog
from arew.eval.model import ChatModel, Completion, GenerationParams

# ChatML wraps a message in "<|im_start|>role\n" ... "<|im_end|>\n": about five tokens
MESSAGE_OVERHEAD = 5
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Token count of ``text`` without a tokenizer: one per :data:`CHARS_PER_TOKEN` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Budget:
    """The training loop's context budget of one episode, in tokens."""

    response_length: int
    max_tokens_per_turn: int
    feedback_reserve_tokens: int


class ChatTranscript:
    """Messages of one episode; the agent's turns come from ``model``, side generations are not kept."""

    def __init__(
        self,
        model: ChatModel,
        messages: list[dict[str, str]],
        params: GenerationParams,
        budget: Budget,
        log: EpisodeLog,
        count_tokens: Callable[[str], int] = estimate_tokens,
    ):
        self.model, self.params, self.budget, self.log = model, params, budget, log
        self.messages = list(messages)
        self.count_tokens = count_tokens
        self.response_tokens = 0
        self.generations = 0
        self.side_generations = 0

    def remaining(self) -> int:
        return self.budget.response_length - self.response_tokens

    def round_fits(self) -> bool:
        return self.remaining() >= 2 * self.budget.max_tokens_per_turn + self.budget.feedback_reserve_tokens

    async def generate(self) -> str:
        max_tokens = min(self.budget.max_tokens_per_turn, self.remaining())
        completion = await self._complete(self.messages, replace(self.params, max_tokens=max_tokens))
        self.generations += 1
        self.response_tokens += completion.completion_tokens or self.count_tokens(completion.text)
        self.messages.append({"role": "assistant", "content": completion.text})
        return completion.text

    def add_feedback(self, text: str) -> bool:
        cost = self.count_tokens(text) + MESSAGE_OVERHEAD
        if self.remaining() - cost < self.budget.max_tokens_per_turn:
            return False
        self.response_tokens += cost
        self.messages.append({"role": "user", "content": text})
        return True

    async def counterfactual_update(self, feedback: str) -> str:
        return await self._side(self.messages + [{"role": "user", "content": feedback}])

    async def counterfactual_action(self, belief: str) -> str | None:
        latest = max((i for i, m in enumerate(self.messages) if m["role"] == "assistant"), default=None)
        if latest is None:
            return None
        messages = list(self.messages)
        messages[latest] = {"role": "assistant", "content": belief}
        return await self._side(messages)

    async def _side(self, messages: list[dict[str, str]]) -> str:
        completion = await self._complete(messages, replace(self.params, max_tokens=self.budget.max_tokens_per_turn))
        self.side_generations += 1
        return completion.text

    async def _complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        if params.seed is not None:  # each call of the episode its own seed: sampled turns differ but replay
            params = replace(params, seed=(params.seed + self.generations + self.side_generations) % 2**31)
        caller, self.log.phase = self.log.phase, "generation"
        completion = await self.model.complete(messages, params)
        self.log.phase = caller
        return completion
