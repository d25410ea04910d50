"""The customer as an LLM that behaves as tau2's user simulator (``customer: llm``).

The system prompt holds the simulation rules and ``task.user_scenario``
(:mod:`arew_tau2.customer.prompts`); the conversation is kept from the customer's side (the
agent's messages are ``user`` turns, its own ``assistant`` turns); the device tools go as OpenAI
``tools`` with ``tool_choice="auto"``, temperature 0. Per reply: POST; while the reply makes tool
calls, each runs on ``device.call`` (a call with malformed arguments or an unknown name is
answered with an error result instead, and the model may correct itself), the assistant
``tool_calls`` message and the ``tool`` results join the conversation, and it POSTs again, up to
``customer_max_tool_steps`` device calls per reply; a text reply ends the turn, its stop token
detected anywhere in the text (the earliest one if several) and stripped. Requests go through
:class:`arew.chat.ChatCompletionClient` (shared concurrency limit, timeouts, retries, circuit
breaker, body cap).

Any failure (no reply, a malformed body, an empty text, a tool call returned as plain text, a
text that the length cap ``customer_max_tokens`` cut while it was repeating itself: a run of
:data:`LOOP_WORDS` words :data:`LOOP_REPEATS` times or more, as small models loop until the cap;
the tool-step bound reached) makes that turn the offline customer's
(``customer_fallback="offline"``, ``source="fallback"``) or a request to repeat (``"repeat"``);
device calls already made in the turn stay made and are not repeated. Fallbacks are counted and
logged (the first of the process, then each time the process count reaches a power of two).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from arew.chat import ChatCompletionClient, ClientConfig, RequestFailed
from arew.chat.config import http_urls
from arew.schema import setting
from arew_tau2.customer import prompts
from arew_tau2.customer.base import PROCESS_STATS, CustomerStats, CustomerTurn, count, split_stop
from arew_tau2.customer.device import Device, DeviceResult, call_safely, tool_names
from arew_tau2.customer.offline import OfflineCustomer
from arew_tau2.customer.reading import MAX_MESSAGE_CHARS

logger = logging.getLogger(__name__)

FALLBACKS = ("offline", "repeat")


@dataclass(frozen=True)
class LLMCustomerConfig(ClientConfig):
    """The client settings (as ``customer_*`` options) with the customer's defaults, and how it samples and falls back."""

    OPTION_PREFIX = "customer_"

    url: str = setting(
        "http://127.0.0.1:8000/v1",
        "base URL of the customer's OpenAI-compatible server, which must do tool calling (vLLM: --enable-auto-tool-choice "
        "--tool-call-parser); replicas: comma-separated",
        rule=http_urls,
    )
    model: str = "Qwen/Qwen2.5-14B-Instruct"
    timeout: float = 60.0
    max_retries: int = 2
    temperature: float = setting(0.0, "the customer's sampling temperature (tau2: 0)", low=0)
    max_tokens: int = setting(256, "length cap of each customer reply or tool-call turn", low=1)
    max_tool_steps: int = setting(
        8,
        "device calls per reply at most (LLM: beyond it the turn falls back; offline: further intents are dropped)",
        low=1,
    )
    fallback: str = setting(
        "offline", "reply when the LLM fails: offline (the offline customer's reply) or repeat (ask the agent to repeat)", choices=FALLBACKS
    )


LOOP_WORDS = 6
LOOP_REPEATS = 3


def repeated_run(text: Any, words: int = LOOP_WORDS) -> int:
    """How often the most frequent run of ``words`` consecutive words occurs in ``text`` (case and
    punctuation aside; 0 when the text is shorter)."""
    tokens = re.findall(r"[\w']+", text.lower()[:MAX_MESSAGE_CHARS * 4]) if isinstance(text, str) else []
    runs: dict[tuple[str, ...], int] = {}
    for i in range(len(tokens) - words + 1):
        run = tuple(tokens[i : i + words])
        runs[run] = runs.get(run, 0) + 1
    return max(runs.values(), default=0)


_TEXT_TOOL_CALL = re.compile(r"<tool_call>|</tool_call>|<\|python_tag\|>|\"name\"\s*:\s*\"\w+\"\s*,\s*\"(?:arguments|parameters)\"")


class LLMCustomer:
    """The customer as an LLM behind an OpenAI-compatible server with tool calling (rules in the module docstring)."""

    def __init__(self, task: Any, config: LLMCustomerConfig | None = None, offline: OfflineCustomer | None = None):
        self.config = config or LLMCustomerConfig()
        self.stats = CustomerStats()
        self.offline = offline or OfflineCustomer(task, self.config.max_tool_steps, stats=self.stats)
        self.client = ChatCompletionClient(self.config, counters=(self.stats, PROCESS_STATS))
        scenario = getattr(task, "user_scenario", "")
        self.history: list[dict[str, Any]] = [{"role": "system", "content": prompts.system_prompt(scenario)}]

    async def reply(self, agent_message: str, device: Device) -> CustomerTurn:
        count(self.stats, "calls")
        message = agent_message if isinstance(agent_message, str) else str(agent_message)
        self.history.append({"role": "user", "content": message})
        tools = [t for t in (getattr(device, "user_tools", None) or []) if isinstance(t, dict)]
        names = tool_names(device)
        sampling: dict[str, Any] = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if tools:
            sampling.update(tools=tools, tool_choice="auto")
        made: list[tuple[str, dict, DeviceResult]] = []
        try:
            while True:
                answer = await self.client.complete(self.history, **sampling)
                if answer.tool_calls:
                    if len(made) + len(answer.tool_calls) > self.config.max_tool_steps:
                        count(self.stats, "tool_step_limits")
                        bound = f"customer_max_tool_steps={self.config.max_tool_steps}"
                        return self._fallback(message, device, made, f"the reply would exceed {bound} device calls")
                    self._run_calls(answer, device, names, made)
                    continue
                if _TEXT_TOOL_CALL.search(answer.text):
                    count(self.stats, "parse_failures")
                    hint = "serve it with --enable-auto-tool-choice --tool-call-parser (hermes for Qwen2.5)"
                    return self._fallback(message, device, made, f"the server returned a tool call as text; {hint}")
                repeats = repeated_run(answer.text) if answer.finish_reason == "length" else 0
                if repeats >= LOOP_REPEATS:
                    count(self.stats, "parse_failures")
                    loop = f"a run of {LOOP_WORDS} words {repeats} times"
                    bound = f"customer_max_tokens={self.config.max_tokens}"
                    return self._fallback(message, device, made, f"the reply repeats itself ({loop}) until {bound} cut it")
                text, stop = split_stop(answer.text)
                if not text and stop is None:
                    count(self.stats, "parse_failures")
                    return self._fallback(message, device, made, "the reply is empty")
                self.history.append({"role": "assistant", "content": answer.text.strip()})
                self.offline.observe(message, made)
                return CustomerTurn(text, stop, "llm")
        except RequestFailed as failure:
            return self._fallback(message, device, made, str(failure))

    def _run_calls(self, answer: Any, device: Any, names: frozenset[str], made: list) -> None:
        """Run one reply's tool calls; the assistant message and the results join the history."""
        self.history.append(
            {
                "role": "assistant",
                "content": answer.text or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        # what was asked, re-encoded: a malformed string sent back would make servers that
                        # re-parse the history (vLLM) reject every later request
                        "function": {"name": call.name or "invalid", "arguments": json.dumps(call.arguments or {})},
                    }
                    for call in answer.tool_calls
                ],
            }
        )
        for call in answer.tool_calls:
            if not call.ok:
                count(self.stats, "tool_errors")
                result = DeviceResult(f"Error: {call.error}; call the tool again with a JSON object of arguments", True)
            elif names and call.name not in names:
                count(self.stats, "tool_errors")
                result = DeviceResult(f"Error: the phone has no tool named {call.name[:64]!r}", True)
            else:
                count(self.stats, "tool_calls")
                result = call_safely(device, call.name, call.arguments)
                if result.error:
                    count(self.stats, "tool_errors")
                made.append((call.name, dict(call.arguments), result))
            self.history.append({"role": "tool", "tool_call_id": call.id, "content": result.content})

    def _fallback(self, message: str, device: Any, made: list, reason: str) -> CustomerTurn:
        count(self.stats, "fallbacks")
        n = PROCESS_STATS.fallbacks
        if n & (n - 1) == 0:
            hint = ""
            if "HTTP 400" in reason:
                hint = " (with tools, an HTTP 400 from vLLM usually means it was started without --enable-auto-tool-choice --tool-call-parser)"
            logger.warning(
                "simulated customer at %s failed (%s)%s; using the %s reply (%d fallbacks in this process)",
                self.config.endpoint,
                reason,
                hint,
                self.config.fallback,
                n,
            )
        if self.config.fallback == "offline":
            turn = self.offline.respond(message, device, made)
        else:
            self.offline.observe(message, made)
            turn = CustomerTurn(prompts.REPEAT, None, "offline")
        content = f"{turn.text} {turn.stop}".strip() if turn.stop else turn.text
        self.history.append({"role": "assistant", "content": content})
        return CustomerTurn(turn.text, turn.stop, "fallback", reason)
