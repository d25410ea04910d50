"""An LLM-simulated user behind an OpenAI-compatible chat-completions server (vLLM, SGLang).

Each reply is one POST to ``{url}/chat/completions`` with the prompt of
:mod:`envs.users.prompts` (temperature 0 by default). Robustness, since a rollout must never
crash or hang on the user:

- concurrency: one :class:`asyncio.Semaphore` per (event loop, endpoint) in the process,
  shared by every user and episode, sized by the first user that reaches the endpoint
  (``concurrency``); the server batches whatever is in flight;
- ``timeout`` seconds per attempt, the wait for a concurrency slot included; a body longer
  than ``max_response_bytes`` is abandoned while it is read (not retried);
- a circuit breaker per endpoint and process (:class:`CircuitBreaker`): after
  ``breaker_failures`` consecutive failed attempts every request falls back at once for
  ``breaker_cooldown`` seconds, then one probe decides whether the server is back;
- up to ``max_retries`` further attempts after a timeout, a refused or broken connection,
  or HTTP 408, 429, 500, 502, 503 or 504, sleeping ``backoff * 2**k`` seconds (at most ``max_backoff``) between
  attempts; other HTTP statuses and malformed replies are not retried (at temperature 0
  the same request gives the same garbage);
- a reply that is not exactly the requested one-line format, names numbers that were not
  offered, or too many of them, is a parse failure;
- whenever no valid LLM answer comes back, the reply falls back to the offline user's
  answer (``fallback="offline"``, default) or to "Unknown" (``fallback="unknown"``),
  with ``source="fallback"`` and the reason in ``error``; the fallback is counted and
  logged (the first one of the process, then each time the process count reaches a
  power of two).

Counters live in ``user.stats`` (this user) and :data:`envs.users.base.PROCESS_STATS`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import weakref
from dataclasses import dataclass
from typing import Any

try:
    import aiohttp
except ImportError:  # only the LLM user needs it; the offline user and the tasks do not
    aiohttp = None

from envs.parsing import chat_completion_text, parse_selection
from envs.users import prompts
from envs.users.base import PROCESS_STATS, SimulatedUser, UserReply, UserRequest, count
from envs.users.offline import OfflineUser

logger = logging.getLogger(__name__)

FALLBACKS = ("offline", "unknown")
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

_BREAKERS: dict[str, CircuitBreaker] = {}
_SEMAPHORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class LLMUserConfig:
    url: str = "http://127.0.0.1:8000/v1"
    model: str = "Qwen/Qwen2.5-14B-Instruct"
    timeout: float = 15.0
    max_retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    concurrency: int = 64
    temperature: float = 0.0
    max_tokens: int = 24
    fallback: str = "offline"
    api_key: str | None = None
    max_response_bytes: int = 65536
    breaker_failures: int = 5
    breaker_cooldown: float = 10.0

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise ValueError(f"user_fallback: must be one of {FALLBACKS}, got {self.fallback!r}")
        checks = (("timeout", 0, True), ("backoff", 0, False), ("max_backoff", 0, False), ("temperature", 0, False),
                  ("breaker_cooldown", 0, False))  # fmt: skip
        for name, low, strict in checks:
            value = getattr(self, name)
            if not math.isfinite(value) or value < low or (strict and value == low):
                bound = "> 0" if strict else ">= 0"
                raise ValueError(f"user_{name}: must be a finite number {bound}, got {value!r}")
        for name, low in (("max_retries", 0), ("concurrency", 1), ("max_tokens", 1), ("max_response_bytes", 1), ("breaker_failures", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"user_{name}: must be an integer >= {low}, got {getattr(self, name)!r}")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"user_url: must be an http(s) URL, got {self.url!r}")

    @property
    def endpoint(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/chat/completions") else url + "/chat/completions"


def shared_semaphore(endpoint: str, limit: int) -> asyncio.Semaphore:
    """The process's semaphore for ``endpoint`` on the running event loop."""
    per_loop = _SEMAPHORES.setdefault(asyncio.get_running_loop(), {})
    if endpoint not in per_loop:
        per_loop[endpoint] = asyncio.Semaphore(limit)
    return per_loop[endpoint]


@dataclass
class CircuitBreaker:
    """One per endpoint and process: after ``threshold`` consecutive failed attempts (timeouts,
    refused or broken connections, retryable HTTP statuses) requests fail at once for ``cooldown``
    seconds; then one probe goes through, and its outcome closes or reopens the breaker."""

    threshold: int
    cooldown: float
    failures: int = 0
    open_until: float = 0.0
    probing: bool = False

    def allow(self) -> bool:
        if self.failures < self.threshold:
            return True
        if self.probing or time.monotonic() < self.open_until:
            return False
        self.probing = True
        return True

    def record(self, server_answered: bool) -> None:
        self.probing = False
        if server_answered:
            self.failures = 0
            return
        self.failures += 1
        if self.failures >= self.threshold:
            self.open_until = time.monotonic() + self.cooldown


def shared_breaker(config: LLMUserConfig) -> CircuitBreaker:
    """The process's breaker for the config's endpoint (made by the first user that reaches it)."""
    return _BREAKERS.setdefault(config.endpoint, CircuitBreaker(config.breaker_failures, config.breaker_cooldown))


class _Retry(Exception):
    """An attempt failed in a way worth retrying."""


class _GiveUp(Exception):
    """An attempt failed in a way not worth retrying."""


class LLMUser(SimulatedUser):
    def __init__(self, config: LLMUserConfig | None = None, offline: OfflineUser | None = None):
        if aiohttp is None:
            raise ImportError("the LLM user needs the 'aiohttp' package: pip install aiohttp")
        super().__init__()
        self.config = config or LLMUserConfig()
        self.offline = offline or OfflineUser()

    async def reply(self, request: UserRequest) -> UserReply:
        count(self.stats, "calls")
        label, choices, max_count = prompts.label_and_choices(request)
        if not choices:  # nothing could be named: no need to ask
            return UserReply((), "llm")
        try:
            text = await self._complete(prompts.messages(request))
        except (_Retry, _GiveUp) as failure:
            return self._fallback(request, str(failure))
        parsed = parse_selection(text, label, choices, max_count)
        if not parsed.ok:
            count(self.stats, "parse_failures")
            return self._fallback(request, f"unparseable reply ({parsed.error}): {text[:80]!r}")
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

    async def _complete(self, messages: list[dict[str, str]]) -> str:
        cfg = self.config
        payload = {
            "model": cfg.model,
            "messages": messages,
            "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens,
        }
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        semaphore = shared_semaphore(cfg.endpoint, cfg.concurrency)
        breaker = shared_breaker(cfg)
        reason = "no attempt was made"
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                count(self.stats, "retries")
                await asyncio.sleep(min(cfg.max_backoff, cfg.backoff * 2 ** (attempt - 1)))
            if not breaker.allow():
                count(self.stats, "short_circuits")
                raise _GiveUp(f"circuit open after {breaker.failures} consecutive failures at {cfg.endpoint}, last: {reason}")
            count(self.stats, "requests")
            try:
                body = await self._attempt(semaphore, payload, headers)
            except _Retry as failure:
                breaker.record(server_answered=False)
                reason = str(failure)
                continue
            except _GiveUp:
                breaker.record(server_answered=True)
                raise
            breaker.record(server_answered=True)
            parsed = chat_completion_text(body)
            if not parsed.ok:
                count(self.stats, "parse_failures")
                raise _GiveUp(f"malformed response: {parsed.error}")
            return parsed.value
        raise _Retry(f"{cfg.max_retries + 1} attempts failed, last: {reason}")

    async def _attempt(self, semaphore: asyncio.Semaphore, payload: dict[str, Any], headers: dict[str, str]) -> Any:
        """One attempt within ``timeout`` seconds, the wait for a concurrency slot included."""
        cfg = self.config
        started = time.monotonic()
        try:
            await asyncio.wait_for(semaphore.acquire(), cfg.timeout)
        except (TimeoutError, asyncio.TimeoutError):
            count(self.stats, "timeouts")
            raise _Retry(f"no free request slot within {cfg.timeout:g} s") from None
        try:
            return await self._post(payload, headers, budget=max(cfg.timeout - (time.monotonic() - started), 1e-3))
        finally:
            semaphore.release()

    async def _read_capped(self, response) -> bytes:
        """The body, read in chunks and abandoned past ``max_response_bytes`` (never held whole)."""
        cap = self.config.max_response_bytes
        if (response.content_length or 0) > cap:
            count(self.stats, "http_errors")
            raise _GiveUp(f"response of {response.content_length} bytes exceeds user_max_response_bytes={cap}")
        chunks, size = [], 0
        async for chunk in response.content.iter_chunked(16384):
            size += len(chunk)
            if size > cap:
                count(self.stats, "http_errors")
                raise _GiveUp(f"response exceeds user_max_response_bytes={cap}")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _post(self, payload: dict[str, Any], headers: dict[str, str], budget: float) -> Any:
        cfg = self.config
        try:
            timeout = aiohttp.ClientTimeout(total=budget)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(cfg.endpoint, json=payload, headers=headers) as response:
                    if response.status in RETRY_STATUSES:
                        count(self.stats, "http_errors")
                        raise _Retry(f"HTTP {response.status}")
                    if response.status != 200:
                        count(self.stats, "http_errors")
                        raise _GiveUp(f"HTTP {response.status}")
                    raw = await self._read_capped(response)
        except (_Retry, _GiveUp):
            raise
        except (TimeoutError, asyncio.TimeoutError) as exc:
            count(self.stats, "timeouts")
            raise _Retry(f"timed out after {cfg.timeout:g} s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            count(self.stats, "connection_errors")
            raise _Retry(f"connection failed: {type(exc).__name__}") from exc
        except Exception as exc:  # anything else from the client library: never crash the episode
            count(self.stats, "connection_errors")
            raise _GiveUp(f"request failed: {type(exc).__name__}: {exc}") from exc
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None
