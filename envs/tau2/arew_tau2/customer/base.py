"""What the environment relies on: ``await customer.reply(message, device)`` never raises and
returns a :class:`CustomerTurn`, whose stop token ends the call as tau2's user simulator does;
its counts are :class:`CustomerStats`, per customer (i.e. per episode) and per process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from arew.envs.users.base import UserStats
from arew.envs.users.base import count as add_count
from arew_tau2.customer.device import Device

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)


@dataclass(frozen=True)
class CustomerTurn:
    text: str  # the customer's message to the agent, stop token removed
    stop: str | None  # one of STOP_TOKENS or None
    source: str  # "llm", "offline" or "fallback"
    error: str | None = None  # why a fallback happened


class Customer(Protocol):
    async def reply(self, agent_message: str, device: Device) -> CustomerTurn: ...


@dataclass
class CustomerStats(UserStats):
    """A simulated user's counts (:class:`arew.envs.users.base.UserStats`) and the customer's phone use:
    ``tool_calls``: device calls made; ``tool_errors``: calls that failed (the device's error,
    malformed arguments, unknown tool); ``tool_step_limits``: LLM replies cut off by
    ``max_tool_steps``. Kept apart from the MediQ/FloDial users' process counts."""

    tool_calls: int = 0
    tool_errors: int = 0
    tool_step_limits: int = 0


PROCESS_STATS = CustomerStats()


def count(stats: CustomerStats, name: str, n: int = 1) -> None:
    """Add ``n`` to counter ``name`` of ``stats`` and of this module's :data:`PROCESS_STATS`."""
    add_count(stats, name, n, process=PROCESS_STATS)


def split_stop(text: Any) -> tuple[str, str | None]:
    """(the text without stop tokens, the earliest stop token in it or None)."""
    text = text if isinstance(text, str) else ""
    found = [(text.find(token), token) for token in STOP_TOKENS if token in text]
    stop = min(found)[1] if found else None
    for token in STOP_TOKENS:
        text = text.replace(token, " ")
    return " ".join(text.split()) if stop else text.strip(), stop
