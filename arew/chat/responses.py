"""Reading an OpenAI-style chat-completions body: whatever a server sends, a :class:`ParseResult` comes
back (never an exception), so that a malformed reply is one counted failure, not a crashed caller.

:class:`ParseResult` and :data:`MAX_TEXT_CHARS` are also those of the agent parsers
(``arew.envs.parsing``, which builds on this package), so a reply passed on as a turn fits their bound."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_TEXT_CHARS = 16_000  # the longest text read: a reply's content or arguments, an agent's turn (arew.envs.parsing)
MAX_TOOL_CALLS = 32
MAX_TOOL_NAME_CHARS = 64


@dataclass(frozen=True)
class ParseResult:
    """A parsed value (what a body or a text holds), or the reason (``error``, a sentence for whoever
    wrote it) why there is none."""

    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def success(cls, value: Any) -> ParseResult:
        return cls(value=value)

    @classmethod
    def failure(cls, reason: str) -> ParseResult:
        return cls(error=reason)


@dataclass(frozen=True)
class ToolCallRequest:
    """One entry of ``message.tool_calls`` (OpenAI format: ``{"id", "type": "function", "function":
    {"name", "arguments": "<JSON object as a string>"}}``). ``arguments`` is the decoded object, or
    None with the reason in ``error`` when the entry cannot be run (arguments that are not a JSON
    object, a missing or odd name): a failure of that one call, for the caller to report back."""

    id: str
    name: str
    arguments: dict | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ChatMessage:
    """``choices[0].message`` of a reply that may call tools: its text ("" when content is null) and its calls."""

    text: str
    tool_calls: tuple[ToolCallRequest, ...] = ()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """A decoded JSON body with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    JSON may escape half of a surrogate pair (``"\\ud800"``); ``json.loads`` gives it back as a code point that
    is not text: it cannot be encoded as UTF-8, so the first writer or tokenizer it reaches raises. A pair that
    decodes to one character is kept; the body's size is capped before decoding, so the walk is bounded.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    return value


def text_problem(content: Any) -> str | None:
    """Why ``content`` is not usable model text (not a string, or longer than :data:`MAX_TEXT_CHARS`), or None."""
    if not isinstance(content, str):
        return "the output is not text"
    if len(content) > MAX_TEXT_CHARS:
        return f"the output is longer than {MAX_TEXT_CHARS} characters"
    return None


def _first_message(response: Any) -> ParseResult:
    """``choices[0].message`` of a chat-completions body, as a dict (or why there is none)."""
    if not isinstance(response, dict):
        return ParseResult(error="the response is not a JSON object")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ParseResult(error="the response has no choices")
    message = choices[0].get("message")
    return ParseResult(message if isinstance(message, dict) else {})


def chat_completion_text(response: Any) -> ParseResult:
    """The assistant text of an OpenAI-style chat-completions JSON body (``choices[0].message.content``)."""
    message = _first_message(response)
    if not message.ok:
        return message
    content = message.value.get("content")
    if not isinstance(content, str):
        return ParseResult(error="the response has no message content")
    problem = text_problem(content)
    if problem:
        return ParseResult(error=problem)
    return ParseResult(content)


def _tool_call(entry: Any, index: int) -> ToolCallRequest:
    fallback_id = f"call_{index}"
    if not isinstance(entry, dict):
        return ToolCallRequest(fallback_id, "", None, "the tool call is not an object")
    call_id = entry.get("id")
    call_id = call_id if isinstance(call_id, str) and call_id and len(call_id) <= 128 else fallback_id
    function = entry.get("function")
    if not isinstance(function, dict):
        return ToolCallRequest(call_id, "", None, "the tool call has no function")
    name = function.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_TOOL_NAME_CHARS:
        return ToolCallRequest(call_id, "", None, "the tool call has no valid function name")
    name = name.strip()
    raw = function.get("arguments")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ToolCallRequest(call_id, name, {})
    if isinstance(raw, dict):
        return ToolCallRequest(call_id, name, dict(raw))
    if not isinstance(raw, str):
        return ToolCallRequest(call_id, name, None, "the arguments are neither a JSON string nor an object")
    if len(raw) > MAX_TEXT_CHARS:
        return ToolCallRequest(call_id, name, None, f"the arguments are longer than {MAX_TEXT_CHARS} characters")
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        return ToolCallRequest(call_id, name, None, f"the arguments are not valid JSON: {raw[:80]!r}")
    if not isinstance(decoded, dict):
        return ToolCallRequest(call_id, name, None, "the arguments are not a JSON object")
    return ToolCallRequest(call_id, name, decoded)


def chat_completion_message(response: Any) -> ParseResult:
    """Text and tool calls of a chat-completions body whose request offered ``tools``.

    A reply is valid when ``message.content`` is text (possibly empty) or, with content null
    or absent, ``message.tool_calls`` is a non-empty list; at most :data:`MAX_TOOL_CALLS`
    calls. Each call is decoded on its own (:class:`ToolCallRequest`): a malformed entry
    is kept with its ``error`` set rather than failing the whole reply."""
    message = _first_message(response)
    if not message.ok:
        return message
    content = message.value.get("content")
    raw_calls = message.value.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        return ParseResult(error="the response's tool_calls is not a list")
    if len(raw_calls) > MAX_TOOL_CALLS:
        return ParseResult(error=f"the response makes {len(raw_calls)} tool calls, at most {MAX_TOOL_CALLS} are read")
    if content is not None and not isinstance(content, str):
        return ParseResult(error="the response's message content is not text")
    if content is None and not raw_calls:
        return ParseResult(error="the response has neither message content nor tool calls")
    problem = text_problem(content or "")
    if problem:
        return ParseResult(error=problem)
    calls = tuple(_tool_call(entry, i) for i, entry in enumerate(raw_calls))
    return ParseResult(ChatMessage(content or "", calls))
