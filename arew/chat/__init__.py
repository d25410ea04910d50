"""Talking to OpenAI-compatible chat-completions servers, for every part of AReW that does: the
simulated users and customer, ``arew eval``'s endpoint model. It knows nothing of the tasks (no
import of arew.envs, verl or ray), so each of them gets the same limits, retries and breaker."""

from __future__ import annotations

from arew.chat.client import ChatCompletionClient, ChatReply, RequestFailed
from arew.chat.config import ClientConfig
from arew.chat.responses import ChatMessage, ParseResult, ToolCallRequest, chat_completion_message, chat_completion_text

__all__ = [
    "ChatCompletionClient",
    "ChatMessage",
    "ChatReply",
    "ClientConfig",
    "ParseResult",
    "RequestFailed",
    "ToolCallRequest",
    "chat_completion_message",
    "chat_completion_text",
]
