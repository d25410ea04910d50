"""A chat client's settings, validated when made: a bad value fails at start-up, naming its option."""

from __future__ import annotations

from dataclasses import dataclass

from arew.schema import check_fields, not_blank, setting


def http_urls(url: str) -> str | None:
    """The rule of a ``url`` setting: one http(s) URL, or several separated by commas, each endpoint once."""
    urls = _split_urls(url)
    if not all(u.startswith(("http://", "https://")) for u in urls):
        return "be an http(s) URL, or several separated by commas"
    return None if len(set(map(_endpoint, urls))) == len(urls) else "name each endpoint once"


@dataclass(frozen=True)
class ClientConfig:
    """Where requests go and how hard to try. A caller whose options carry a prefix (the LLM
    user's ``user_timeout``) subclasses with ``OPTION_PREFIX``, so that errors name its options;
    a subclass that only changes a default keeps the declaration below (:func:`arew.schema.check_fields`),
    one that says more about a field declares it again. These declarations are the options' checks
    and documentation (``arew.envs.options.PrefixedOptions`` makes the fields flat options)."""

    OPTION_PREFIX = ""  # unannotated: a class attribute, not a field (nor a user option)

    url: str = setting(doc="base URL of the OpenAI-compatible server (replicas: comma-separated)", kind=str, rule=http_urls)
    model: str = setting(doc="served model name", kind=str, rule=not_blank)
    timeout: float = setting(doc="seconds per request attempt, the wait for a concurrency slot included", kind=float, above=0)
    max_retries: int = setting(doc="further attempts after a timeout, refused connection or HTTP 408/429/5xx", kind=int, low=0)
    backoff: float = setting(0.5, "first wait in seconds between attempts (doubles per attempt)", low=0)
    max_backoff: float = setting(8.0, "longest wait in seconds between attempts", low=0)
    concurrency: int = setting(64, "requests in flight per process and endpoint (shared with every client of that URL)", low=1)
    api_key: str | None = setting(None, "bearer token, if the server wants one", kind=str, nullable=True, repr=False)  # a secret
    max_response_bytes: int = setting(65536, "longest reply body read (longer: a failed request)", low=1)
    breaker_failures: int = setting(5, "consecutive failed attempts that open the endpoint's circuit", low=1)
    breaker_cooldown: float = setting(10.0, "seconds the circuit stays open before one probe request", low=0)

    def __post_init__(self) -> None:
        check_fields(self, self.OPTION_PREFIX)

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Each replica's ``.../chat/completions`` URL, in the order ``url`` lists them."""
        return tuple(_endpoint(u) for u in _split_urls(self.url))

    @property
    def endpoint(self) -> str:
        """The endpoint, or the replicas' endpoints joined by commas (the key of their shared limit)."""
        return ",".join(self.endpoints)


def _split_urls(url: str) -> list[str]:
    return [part.strip() for part in url.split(",")]


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"
