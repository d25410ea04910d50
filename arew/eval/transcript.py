"""The episode driver's transcript on chat messages, for ``arew eval``'s chat models.

The budget is the training loop's (:class:`arew.verl_plugin.agent_loop.AgentLoopSettings`,
``data.max_response_length``), counted in tokens as training's token stream counts them: a turn
costs its tokens (what the backend reports, else what the :class:`TokenCounter` says of its text)
plus its end-of-turn token; a feedback message its tokens plus the chat template's tokens around
it. With the model's tokenizer (:meth:`TokenCounter.of_tokenizer`) the counts match training's
within a few tokens of merges at message boundaries; without one (an endpoint and no
``--tokenizer``) they are estimates (:func:`estimate_tokens`, ChatML's overhead).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from arew.eval.model import ChatModel, Completion, GenerationParams

CHARS_PER_TOKEN = 4
# ChatML around a user message and the next generation prompt: "\n<|im_start|>user\n" ...
# "<|im_end|>\n<|im_start|>assistant\n", eight tokens with Qwen's tokenizer
CHATML_MESSAGE_OVERHEAD = 8


def estimate_tokens(text: str) -> int:
    """Token count of ``text`` without a tokenizer: one per :data:`CHARS_PER_TOKEN` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class TokenCounter:
    """Tokens of a text, and the template tokens a feedback message adds around its text."""

    count: Callable[[str], int] = estimate_tokens
    message_overhead: int = CHATML_MESSAGE_OVERHEAD

    @classmethod
    def of_tokenizer(cls, tokenizer) -> TokenCounter:
        """Exact counts with ``tokenizer``; the overhead measured on its chat template once."""

        def count(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False)["input_ids"])

        def rendered(messages, prompt: bool) -> int:
            return len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=prompt, return_dict=False))

        turn = [{"role": "user", "content": "question"}, {"role": "assistant", "content": "reply"}]
        with_feedback = rendered(turn + [{"role": "user", "content": "feedback"}], True)
        return cls(count, max(0, with_feedback - rendered(turn, False) - count("feedback")))


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
        tokens: TokenCounter = TokenCounter(),
    ):
        self.model, self.params, self.budget = model, params, budget
        self.messages = list(messages)
        self.tokens = tokens
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
        self.response_tokens += (completion.completion_tokens or self.tokens.count(completion.text)) + 1  # + end of turn
        self.messages.append({"role": "assistant", "content": completion.text})
        return completion.text

    def add_feedback(self, text: str) -> bool:
        cost = self.tokens.count(text) + self.tokens.message_overhead
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
        return await self.model.complete(messages, params)
