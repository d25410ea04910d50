"""Simulated users for MediQ and FloDial: an LLM behind an HTTP API, or a deterministic offline matcher.

Environments take the user's settings as flat options (``make_env(..., **options)``, from
``arew_agent.env_options``); :func:`make_user` reads them:

===========================  ===============================  =========================================
option                       default                          meaning
===========================  ===============================  =========================================
``user``                     ``"offline"``                    ``"offline"`` (lexical) or ``"llm"``
``user_url``                 ``"http://127.0.0.1:8000/v1"``   OpenAI-compatible base URL (replicas: comma-separated)
``user_model``               ``"Qwen/Qwen2.5-14B-Instruct"``  served model name
``user_timeout``             ``15.0``                         seconds per attempt, slot wait included
``user_max_retries``         ``2``                            further attempts after a failed one
``user_backoff``             ``0.5``                          first wait between attempts (doubles)
``user_max_backoff``         ``8.0``                          longest wait between attempts
``user_concurrency``         ``64``                           requests in flight per process and URL
``user_temperature``         ``0.0``                          sampling temperature
``user_max_tokens``          ``24``                           reply length cap
``user_fallback``            ``"offline"``                    ``"offline"`` or ``"unknown"`` on failure
``user_api_key``             ``None``                         bearer token, if the server wants one
``user_max_response_bytes``  ``65536``                        longest reply body read (then: fallback)
``user_breaker_failures``    ``5``                            consecutive failures that open the circuit
``user_breaker_cooldown``    ``10.0``                         seconds open before one probe request
``user_fact_threshold``      ``0.5``                          offline MediQ match threshold
``user_row_threshold``       ``0.5``                          offline FloDial match threshold
===========================  ===============================  =========================================
"""

from __future__ import annotations

from typing import Any

from arew.envs.users.base import (
    PROCESS_STATS,
    FactRequest,
    RowRequest,
    SimulatedUser,
    UserReply,
    UserRequest,
    UserStats,
)
from arew.envs.users.llm import LLMUser, LLMUserConfig
from arew.envs.users.offline import FACT_THRESHOLD, ROW_THRESHOLD, OfflineUser

USER_KINDS = ("offline", "llm")
_LLM_FIELDS = tuple(LLMUserConfig.__dataclass_fields__)
USER_OPTIONS = ("user", "user_fact_threshold", "user_row_threshold") + tuple(f"user_{f}" for f in _LLM_FIELDS)


def split_user_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the user options among ``options``, the rest)."""
    user = {k: v for k, v in options.items() if k in USER_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in USER_OPTIONS}
    return user, rest


def make_user(
    user: str = "offline",
    user_fact_threshold: float = FACT_THRESHOLD,
    user_row_threshold: float = ROW_THRESHOLD,
    **llm_options: Any,
) -> SimulatedUser:
    """A user from the flat options documented above; unknown options raise ``TypeError``;
    the LLM settings are ignored when ``user="offline"``."""
    if user not in USER_KINDS:
        raise ValueError(f"user: must be one of {USER_KINDS}, got {user!r}")
    unknown = [k for k in llm_options if not k.startswith("user_") or k[5:] not in _LLM_FIELDS]
    if unknown:
        raise TypeError(f"unknown user options {unknown}; known: {list(USER_OPTIONS)}")
    offline = OfflineUser(float(user_fact_threshold), float(user_row_threshold))
    if user == "offline":  # the LLM settings may stay in the config; they are not used
        return offline
    return LLMUser(LLMUserConfig(**{k[5:]: _coerce(k[5:], v) for k, v in llm_options.items()}), offline)


def _coerce(name: str, value: Any) -> Any:
    """Config values as the field's type (YAML gives ints for floats, strings for numbers)."""
    default = LLMUserConfig.__dataclass_fields__[name].default
    if value is None or default is None:
        return None if value is None else str(value)
    try:
        return type(default)(value)
    except (TypeError, ValueError):
        raise ValueError(f"user_{name}: expected a {type(default).__name__}, got {value!r}") from None


__all__ = [
    "PROCESS_STATS",
    "USER_KINDS",
    "USER_OPTIONS",
    "FactRequest",
    "LLMUser",
    "LLMUserConfig",
    "OfflineUser",
    "RowRequest",
    "SimulatedUser",
    "UserReply",
    "UserRequest",
    "UserStats",
    "make_user",
    "split_user_options",
]
