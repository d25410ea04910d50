"""The phone in the customer's hand: the 30 device tools of tau2's ``TelecomUserTools``, run on the
episode's environment as requestor "user" and recorded in the trajectory (the environment's
``EpisodeDevice``). What the phone shows stays hidden from the agent unless the customer says it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

MAX_OUTPUT_CHARS = 400


@dataclass(frozen=True)
class DeviceResult:
    content: str
    error: bool


class Device(Protocol):
    user_tools: list[dict]  # OpenAI tool schemas of the device (user-side) tools

    def call(self, name: str, arguments: dict) -> DeviceResult: ...


def call_safely(device: Any, name: str, arguments: dict) -> DeviceResult:
    """``device.call``, with whatever the device raises turned into an error result: a device must not crash the customer."""
    try:
        result = device.call(name, dict(arguments))
        content = getattr(result, "content", "")
        return DeviceResult("" if content is None else str(content), bool(getattr(result, "error", False)))
    except Exception as exc:
        return DeviceResult(f"Error: {type(exc).__name__}: {exc}"[:MAX_OUTPUT_CHARS], True)


def tool_names(device: Any) -> frozenset[str]:
    """The names of the device's tool schemas (malformed schemas skipped)."""
    names = set()
    for schema in getattr(device, "user_tools", None) or []:
        function = schema.get("function") if isinstance(schema, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)
