"""An LLM-simulated user behind an OpenAI-compatible chat-completions server (vLLM, SGLang).

Each reply is one request through :class:`arew.chat.ChatCompletionClient` with the
prompt of :mod:`arew.envs.users.prompts` (temperature 0 by default); the client bounds concurrency,
time per attempt, retries and reply size, and opens a circuit per endpoint and process when the
server stops answering (see its module). Since a rollout must never crash or hang on the user:

- a reply is read by :func:`arew.envs.parsing.parse_selection`: the requested line (``FACTS: 2, 5``,
  ``ROW: 3``, ``... NONE``), or what real models write when its meaning is unambiguous (that
  line followed by an explanation, a bare yes/no before it, numbered lines quoting the offered
  items word for word); a reply that is ambiguous, names numbers that were not offered, or too
  many of them, or that the length cap (``finish_reason == "length"``) may have cut inside the
  answer, is a parse failure;
- whenever no valid LLM answer comes back, the reply falls back to the offline user's
  answer (``fallback="offline"``, default) or to "Unknown" (``fallback="unknown"``),
  with ``source="fallback"`` and the reason in ``error``; the fallback is counted and
  logged (the first one of the process, then each time the process count reaches a
  power of two).

Counters live in ``user.stats`` (this user) and :data:`arew.envs.users.base.PROCESS_STATS`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from arew.chat import ChatCompletionClient, ClientConfig, RequestFailed
from arew.envs.parsing import parse_selection
from arew.envs.users import prompts
from arew.envs.users.base import PROCESS_STATS, SimulatedUser, UserReply, UserRequest, count
from arew.envs.users.offline import OfflineUser
from arew.schema import setting

logger = logging.getLogger(__name__)

FALLBACKS = ("offline", "unknown")


@dataclass(frozen=True)
class LLMUserConfig(ClientConfig):
    """The client settings (as ``user_*`` options) with the user's defaults, and how the user samples and falls back."""

    OPTION_PREFIX = "user_"

    url: str = "http://127.0.0.1:8000/v1"
    model: str = "Qwen/Qwen2.5-14B-Instruct"
    timeout: float = 15.0
    max_retries: int = 2
    temperature: float = setting(0.0, "sampling temperature", low=0)
    max_tokens: int = setting(24, "reply length cap", low=1)
    fallback: str = setting("offline", "reply when the LLM fails: offline (the offline user's) or unknown", choices=FALLBACKS)


class LLMUser(SimulatedUser):
    def __init__(self, config: LLMUserConfig | None = None, offline: OfflineUser | None = None):
        super().__init__()
        self.config = config or LLMUserConfig()
        self.offline = offline or OfflineUser()
        self.client = ChatCompletionClient(self.config, counters=(self.stats, PROCESS_STATS))

    async def reply(self, request: UserRequest) -> UserReply:
        count(self.stats, "calls")
        label, choices, max_count = prompts.label_and_choices(request)
        if not choices:  # nothing could be named: no need to ask
            return UserReply((), "llm")
        try:
            answer = await self.client.complete(
                prompts.messages(request), temperature=self.config.temperature, max_tokens=self.config.max_tokens
            )
        except RequestFailed as failure:
            return self._fallback(request, str(failure))
        truncated = answer.finish_reason == "length"
        parsed = parse_selection(answer.text, label, choices, max_count, prompts.choice_texts(request), truncated)
        if not parsed.ok:
            count(self.stats, "parse_failures")
            return self._fallback(request, f"unparseable reply ({parsed.error}): {answer.text[:80]!r}")
        return UserReply(tuple(n - 1 for n in parsed.value), "llm")

    def _fallback(self, request: UserRequest, reason: str) -> UserReply:
        count(self.stats, "fallbacks")
        n = PROCESS_STATS.fallbacks
        if n & (n - 1) == 0:
            logger.warning(
                "simulated user at %s failed (%s); using the %s answer (%d fallbacks in this process)",
                self.config.endpoint,
                reason,
                self.config.fallback,
                n,
            )
        ids = self.offline.answer(request) if self.config.fallback == "offline" else ()
        return UserReply(ids, "fallback", reason)
