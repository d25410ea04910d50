"""The endpoint backend of ``arew eval``: any OpenAI-compatible chat endpoint (vLLM, SGLang, hosted APIs).

:class:`EndpointModel` sends each turn through :class:`arew.chat.ChatCompletionClient`,
the client the LLM simulated user relies on: a concurrency limit per endpoint and process, a
timeout per attempt (the wait for a slot included), retries with exponential backoff on timeouts,
connection errors and HTTP 408/429/5xx, a circuit breaker per endpoint and process, a cap on the
reply body. Defaults of :meth:`EndpointModel.from_options`: 120 s per attempt (an agent turn can be
thousands of tokens), 3 retries, 64 requests in flight (one per concurrent episode), the API key
from ``$OPENAI_API_KEY`` (sent as a bearer token, never logged; unset: no key, as local servers want).

The agent has no fallback: when every attempt fails, the reply is malformed or ends abnormally
(a ``finish_reason`` other than "stop" or "length"), or the circuit is open, :meth:`complete`
raises :class:`GenerationError` with the reason at once, and the episode fails as ``generation``.

Stop strings: verl's engines return a turn up to and including the stop string that ended it;
OpenAI-compatible servers cut it off. The parsers do not accept the cut text:
:func:`arew.envs.parsing.extract_tag` rejects ``<interact>question`` without ``</interact>`` ("write
exactly one <interact> and one </interact>"), so every stopped turn would be invalid. The stop
string is therefore put back when ``finish_reason`` is "stop" and the text does not already end
with one: the one the server names (vLLM's ``stop_reason``, SGLang's ``matched_stop``; None there
means the end of sequence, and the text stays as it is); where the server names none (OpenAI's
API), a stop string ``</tag>`` whose ``<tag>`` block the text leaves open (the last one opened).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from arew.chat import ChatCompletionClient, ChatReply, ClientConfig, RequestFailed
from arew.chat.client import RequestCounts
from arew.eval.model import Completion, GenerationError, GenerationParams

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_CONCURRENCY = 64
MAX_RESPONSE_BYTES = 4 * 2**20  # a long turn, JSON-escaped, with room; the client's 64 KiB suits only short replies
FINISH_REASONS = {"stop": "stop", "length": "length", None: "stop"}  # None: a server that leaves it out


@dataclass
class EndpointStats(RequestCounts):
    """Counts of one :class:`EndpointModel` for the runner's report: ``requests`` HTTP attempts,
    ``retries`` attempts after the first, ``timeouts``, ``connection_errors`` and ``http_errors``
    failed attempts by kind, ``short_circuits`` requests not made because the circuit was open,
    ``parse_failures`` replies malformed or ended abnormally, ``completions`` turns returned."""

    completions: int = 0

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {prefix + key: float(value) for key, value in asdict(self).items()}


class EndpointModel:
    """A :class:`~arew.eval.model.ChatModel` served behind ``config.endpoint``."""

    def __init__(self, config: ClientConfig):
        self.name = config.model
        self.stats = EndpointStats()
        self.client = ChatCompletionClient(config, counters=(self.stats,))

    @classmethod
    def from_options(
        cls,
        url: str,
        model: str,
        api_key_env: str | None = DEFAULT_API_KEY_ENV,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> EndpointModel:
        """The model the CLI's options describe; a bad value raises ``ValueError`` naming its option.
        ``api_key_env=None`` sends no key whatever the environment holds."""
        if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
            raise ValueError(f"api_key_env: must name an environment variable, got {api_key_env!r}")
        api_key = os.environ.get(api_key_env) if api_key_env else None
        config = ClientConfig(
            url=url,
            model=model,
            timeout=timeout,
            max_retries=max_retries,
            concurrency=concurrency,
            api_key=api_key or None,
            max_response_bytes=MAX_RESPONSE_BYTES,
        )
        return cls(config)

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        sampling = {"temperature": params.temperature, "top_p": params.top_p, "max_tokens": params.max_tokens}
        if params.stop:
            sampling["stop"] = list(params.stop)
        if params.seed is not None:
            sampling["seed"] = params.seed
        endpoint = self.client.config.endpoint
        try:
            reply = await self.client.complete(messages, **sampling)
        except RequestFailed as failure:
            raise GenerationError(f"{endpoint}: {failure}") from failure
        if reply.finish_reason not in FINISH_REASONS:
            self.stats.parse_failures += 1
            raise GenerationError(f"{endpoint}: the turn ended with finish_reason {reply.finish_reason!r}")
        self.stats.completions += 1
        return Completion(
            text=with_stop_string(reply, params.stop),
            finish_reason=FINISH_REASONS[reply.finish_reason],
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )


def with_stop_string(reply: ChatReply, stop: tuple[str, ...]) -> str:
    """The reply's text ending with the stop string that ended it, as a training engine returns it."""
    text = reply.text
    if reply.finish_reason not in ("stop", None) or not stop or text.endswith(stop):
        return text
    if reply.stop_reported:
        return text + reply.stop_reason if reply.stop_reason in stop else text
    return text + _closing_tag_of_open_block(text, stop)


def _closing_tag_of_open_block(text: str, stop: tuple[str, ...]) -> str:
    """The stop string ``</tag>`` whose ``<tag>`` the text opened last and left open, or ""."""
    closing, opened_at = "", -1
    for candidate in stop:
        if not (candidate.startswith("</") and candidate.endswith(">")):
            continue
        start = text.rfind("<" + candidate[2:])
        if start > max(text.rfind(candidate), opened_at):
            closing, opened_at = candidate, start
    return closing
