"""A client for an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, hosted APIs), or for
several replicas of one, that never crashes or hangs its caller: the LLM simulated user
(:mod:`arew.envs.users.llm`), tau2-dual's customer and ``arew eval``'s endpoint model all lean on it,
so the robustness below is written once.

``url`` is one base URL, or several separated by commas (``http://a:8000/v1,http://b:8000/v1``:
replicas serving the same model, as ``arew_user_service.replicas`` > 1 starts them). Each
:meth:`ChatCompletionClient.complete` is one POST to ``{url}/chat/completions`` of one of them:

- replicas: each attempt goes to the replica with the fewest of this process's requests
  assigned to it, ties broken round-robin (so one caller's requests alternate), skipping
  replicas whose circuit is open and, on a retry, preferring one this request has not tried:
  a dead replica costs the requests in flight on it one retry on a healthy one;
- concurrency: one :class:`asyncio.Semaphore` per (event loop, endpoint set) in the process,
  shared by every client of that set, whichever replica each request goes to, sized by the
  first one that reaches it (``concurrency``); the servers batch whatever is in flight; one
  HTTP session per (event loop, replica) keeps connections open between requests
  (:func:`shared_session`);
- ``timeout`` seconds per attempt, the wait for a concurrency slot included; a body longer
  than ``max_response_bytes`` is abandoned while it is read (not retried);
- a circuit breaker per replica and process (:class:`CircuitBreaker`): after
  ``breaker_failures`` consecutive failed attempts at a replica, it gets no requests for
  ``breaker_cooldown`` seconds (the others take them), then one probe decides whether it is
  back; a request fails at once (``short_circuits``) only while every replica's circuit is open;
- up to ``max_retries`` further attempts after a timeout, a refused or broken connection,
  or HTTP 408, 429, 500, 502, 503 or 504, sleeping ``backoff * 2**k`` seconds (at most ``max_backoff``) between
  attempts; other HTTP statuses and malformed replies are not retried (at temperature 0
  the same request gives the same garbage);
- a reply without text at ``choices[0].message.content`` is a parse failure
  (:func:`arew.chat.responses.chat_completion_text`), except that a request offering ``tools``
  (passed, like ``tool_choice``, in ``sampling``) also accepts a reply whose content is null
  but which makes tool calls (:func:`arew.chat.responses.chat_completion_message`; they land in
  :attr:`ChatReply.tool_calls`, one malformed call being marked there, not failing the
  reply); ``finish_reason``, the stop that ended the text (vLLM's ``stop_reason``,
  SGLang's ``matched_stop``) and the ``usage`` token counts are read where present
  (:class:`ChatReply`).

A request that yields no reply raises :class:`RequestFailed` with the reason. Each event adds 1 to
the counter of that name (:data:`COUNTERS`) on every object in the client's ``counters``.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from dataclasses import dataclass, fields
from typing import Any

try:
    import aiohttp
except ImportError:  # only the HTTP clients need it; the offline user and the tasks do not
    aiohttp = None

from arew.chat.config import ClientConfig
from arew.chat.responses import ToolCallRequest, chat_completion_message, chat_completion_text, without_lone_surrogates

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass
class RequestCounts:
    """A counter per event the client counts: a ready ``counters`` object for a caller without counts of its own."""

    requests: int = 0
    retries: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    http_errors: int = 0
    short_circuits: int = 0
    parse_failures: int = 0


COUNTERS = tuple(f.name for f in fields(RequestCounts))

_BREAKERS: dict[str, CircuitBreaker] = {}
_SESSIONS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[dict[str, Any], Any]] = weakref.WeakKeyDictionary()
_SEMAPHORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


async def shared_session(endpoint: str) -> aiohttp.ClientSession:
    """The process's HTTP session for ``endpoint`` on the running event loop: connections stay open
    between requests (a session per request cost about 0.5 ms of CPU per request,
    benchmarks/eval_throughput.py). The loop closes its sessions when it shuts down."""
    loop = asyncio.get_running_loop()
    if loop not in _SESSIONS:
        sessions: dict[str, aiohttp.ClientSession] = {}
        closer = _close_at_shutdown(sessions)
        await closer.__anext__()  # suspended in the loop: shutdown_asyncgens() closes it, and the sessions
        _SESSIONS[loop] = (sessions, closer)
    sessions = _SESSIONS[loop][0]
    if endpoint not in sessions or sessions[endpoint].closed:
        sessions[endpoint] = aiohttp.ClientSession()
    return sessions[endpoint]


async def _close_at_shutdown(sessions: dict[str, Any]):
    try:
        yield
    finally:
        for session in sessions.values():
            await session.close()


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

    def available(self) -> bool:
        """Whether :meth:`allow` would let a request through (without claiming the probe)."""
        return self.failures < self.threshold or not (self.probing or time.monotonic() < self.open_until)

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


def shared_breaker(config: ClientConfig, endpoint: str | None = None) -> CircuitBreaker:
    """The process's breaker for one replica's ``endpoint`` (default: the config's only one),
    made by the first client that reaches it."""
    key = endpoint if endpoint is not None else config.endpoints[0]
    return _BREAKERS.setdefault(key, CircuitBreaker(config.breaker_failures, config.breaker_cooldown))


_ASSIGNED: dict[str, int] = {}  # replica endpoint -> this process's requests assigned to it now
_CURSORS: dict[str, int] = {}  # endpoint set -> where the round-robin tie-break starts next


def choose_replica(config: ClientConfig, tried: frozenset[str] = frozenset()) -> str | None:
    """The replica endpoint the next attempt goes to (its breaker's probe claimed if half-open), or
    None when every replica's circuit is open: fewest assigned requests first, replicas ``tried``
    by this request last, ties broken round-robin."""
    endpoints = config.endpoints
    start = _CURSORS.get(config.endpoint, 0)
    order = [endpoints[(start + i) % len(endpoints)] for i in range(len(endpoints))]
    candidates = [e for e in order if shared_breaker(config, e).available()]
    candidates.sort(key=lambda e: (e in tried, _ASSIGNED.get(e, 0)))  # stable: round-robin among equals
    for endpoint in candidates:
        if shared_breaker(config, endpoint).allow():
            _CURSORS[config.endpoint] = (endpoints.index(endpoint) + 1) % len(endpoints)
            return endpoint
    return None


@dataclass(frozen=True)
class ChatReply:
    """``choices[0]`` of a reply. ``stop_reported`` says whether the server tells which stop ended
    the text (vLLM, SGLang: the stop string, a stop token id, or None at the end of sequence);
    OpenAI's own API does not, so ``stop_reason`` is None there too."""

    text: str
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    stop_reported: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # the reply's tool calls (only when the request offered tools): id, name, decoded arguments
    # (None, with the reason in ``error``, for a call whose arguments are not a JSON object)
    tool_calls: tuple[ToolCallRequest, ...] = ()


class RequestFailed(Exception):
    """No reply came back; the message says why."""


class _Retry(RequestFailed):
    """An attempt failed in a way worth retrying."""


class _GiveUp(RequestFailed):
    """An attempt failed in a way not worth retrying."""


class ChatCompletionClient:
    def __init__(self, config: ClientConfig, counters: tuple[Any, ...] = ()):
        if aiohttp is None:
            raise ImportError("talking to a chat-completions server needs the 'aiohttp' package: pip install aiohttp")
        self.config = config
        self.counters = counters

    def _count(self, name: str) -> None:
        for stats in self.counters:
            setattr(stats, name, getattr(stats, name) + 1)

    async def complete(self, messages: list[dict[str, Any]], **sampling: Any) -> ChatReply:
        """The reply to ``messages``; ``sampling`` (temperature, max_tokens, stop, tools, tool_choice...)
        joins the request body as it is. With a non-empty ``tools``, a reply of tool calls without
        text is a reply (``text`` ""). Raises :class:`RequestFailed` when none came."""
        cfg = self.config
        payload = {"model": cfg.model, "messages": messages, **sampling}
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        semaphore = shared_semaphore(cfg.endpoint, cfg.concurrency)
        tools_offered = bool(sampling.get("tools"))
        reason = "no attempt was made"
        tried: set[str] = set()
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                self._count("retries")
                await asyncio.sleep(min(cfg.max_backoff, cfg.backoff * 2 ** (attempt - 1)))
            endpoint = choose_replica(cfg, frozenset(tried))
            if endpoint is None:
                self._count("short_circuits")
                if len(cfg.endpoints) == 1:
                    failures = shared_breaker(cfg).failures
                    raise _GiveUp(f"circuit open after {failures} consecutive failures at {cfg.endpoint}, last: {reason}")
                raise _GiveUp(f"circuit open at all {len(cfg.endpoints)} replicas ({cfg.endpoint}), last: {reason}")
            breaker = shared_breaker(cfg, endpoint)
            self._count("requests")
            tried.add(endpoint)
            _ASSIGNED[endpoint] = _ASSIGNED.get(endpoint, 0) + 1
            try:
                body = await self._attempt(semaphore, endpoint, payload, headers)
            except _Retry as failure:
                breaker.record(server_answered=False)
                reason = f"{failure} ({endpoint})" if len(cfg.endpoints) > 1 else str(failure)
                continue
            except _GiveUp:
                breaker.record(server_answered=True)
                raise
            except BaseException:  # cancelled: a claimed probe must not stay claimed forever
                breaker.probing = False
                raise
            finally:
                _ASSIGNED[endpoint] -= 1
            breaker.record(server_answered=True)
            parsed = chat_completion_message(body) if tools_offered else chat_completion_text(body)
            if not parsed.ok:
                self._count("parse_failures")
                raise _GiveUp(f"malformed response: {parsed.error}")
            if tools_offered:
                return _reply(body, parsed.value.text, parsed.value.tool_calls)
            return _reply(body, parsed.value)
        raise _Retry(f"{cfg.max_retries + 1} attempts failed, last: {reason}")

    async def _attempt(self, semaphore: asyncio.Semaphore, endpoint: str, payload: dict[str, Any], headers: dict[str, str]) -> Any:
        """One attempt within ``timeout`` seconds, the wait for a concurrency slot included."""
        cfg = self.config
        started = time.monotonic()
        try:
            await asyncio.wait_for(semaphore.acquire(), cfg.timeout)
        except (TimeoutError, asyncio.TimeoutError):
            self._count("timeouts")
            raise _Retry(f"no free request slot within {cfg.timeout:g} s") from None
        try:
            return await self._post(endpoint, payload, headers, budget=max(cfg.timeout - (time.monotonic() - started), 1e-3))
        finally:
            semaphore.release()

    async def _read_capped(self, response) -> bytes:
        """The body, read in chunks and abandoned past ``max_response_bytes`` (never held whole)."""
        cap = self.config.max_response_bytes
        option = f"{self.config.OPTION_PREFIX}max_response_bytes={cap}"
        if (response.content_length or 0) > cap:
            self._count("http_errors")
            raise _GiveUp(f"response of {response.content_length} bytes exceeds {option}")
        chunks, size = [], 0
        async for chunk in response.content.iter_chunked(16384):
            size += len(chunk)
            if size > cap:
                self._count("http_errors")
                raise _GiveUp(f"response exceeds {option}")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _post(self, endpoint: str, payload: dict[str, Any], headers: dict[str, str], budget: float) -> Any:
        cfg = self.config
        try:
            session = await shared_session(endpoint)
            timeout = aiohttp.ClientTimeout(total=budget)
            async with session.post(endpoint, json=payload, headers=headers, timeout=timeout) as response:
                if response.status in RETRY_STATUSES:
                    self._count("http_errors")
                    raise _Retry(f"HTTP {response.status}")
                if response.status != 200:
                    self._count("http_errors")
                    raise _GiveUp(f"HTTP {response.status}")
                raw = await self._read_capped(response)
        except (_Retry, _GiveUp):
            raise
        except (TimeoutError, asyncio.TimeoutError) as exc:
            self._count("timeouts")
            raise _Retry(f"timed out after {cfg.timeout:g} s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            self._count("connection_errors")
            raise _Retry(f"connection failed: {type(exc).__name__}") from exc
        except Exception as exc:  # anything else from the client library: never crash the caller
            self._count("connection_errors")
            raise _GiveUp(f"request failed: {type(exc).__name__}: {exc}") from exc
        try:
            return without_lone_surrogates(json.loads(raw))
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting deeper than Python's stack
            return None


def _reply(body: dict[str, Any], text: str, tool_calls: tuple[ToolCallRequest, ...] = ()) -> ChatReply:
    """The metadata beside the text; what is absent or of the wrong type reads as unknown (None)."""
    choice = body["choices"][0]
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    stop_key = next((key for key in ("stop_reason", "matched_stop") if key in choice), None)
    stop = choice.get(stop_key)
    finish = choice.get("finish_reason")
    return ChatReply(
        text,
        finish_reason=finish if isinstance(finish, str) else None,
        stop_reason=stop if isinstance(stop, (str, int)) and not isinstance(stop, bool) else None,
        stop_reported=stop_key is not None,
        prompt_tokens=_token_count(usage.get("prompt_tokens")),
        completion_tokens=_token_count(usage.get("completion_tokens")),
        tool_calls=tuple(tool_calls),
    )


def _token_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
