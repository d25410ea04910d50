"""Simulated users for MediQ and FloDial: an LLM behind an HTTP API, or a deterministic offline matcher.

Environments take the user's settings as flat options (``make_env(..., **options)``, from
``arew_agent.env_options``), declared in :data:`USER_OPTIONS` (defaults: :data:`USER_DEFAULTS`):
``user`` picks the kind, ``user_fact_threshold`` and ``user_row_threshold`` tune the offline user,
and ``user_<field>`` sets a field of :class:`~arew.envs.users.llm.LLMUserConfig` (the client and
sampling settings). :func:`make_user` reads them. The table of every option, its default and its
meaning is generated from these declarations in ``docs/reference/configuration.md``
(``arew_agent.env_options``, Simulated user).
"""

from __future__ import annotations

from typing import Any

from arew.envs.options import Option, PrefixedOptions
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
LLM_USER_OPTIONS = PrefixedOptions(LLMUserConfig, LLMUserConfig.OPTION_PREFIX)
_OFFLINE_OPTIONS: dict[str, Option] = {
    "user": Option(
        str,
        "simulated user: offline (lexical matching, no model) or llm (an OpenAI-compatible server)",
        choices=USER_KINDS,
    ),
    "user_fact_threshold": Option(float, "offline MediQ user: least match score of a fact it reveals"),
    "user_row_threshold": Option(float, "offline FloDial user: least match score of the table row it answers with"),
}
USER_OPTIONS: dict[str, Option] = {**_OFFLINE_OPTIONS, **LLM_USER_OPTIONS.options}
USER_DEFAULTS: dict[str, Any] = {
    "user": "offline",
    "user_fact_threshold": FACT_THRESHOLD,
    "user_row_threshold": ROW_THRESHOLD,
    **LLM_USER_OPTIONS.defaults,
}


def split_user_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the user options among ``options``, the rest)."""
    user = {k: v for k, v in options.items() if k in USER_OPTIONS}
    rest = {k: v for k, v in options.items() if k not in USER_OPTIONS}
    return user, rest


def make_user(**options: Any) -> SimulatedUser:
    """A user from the flat options of :data:`USER_OPTIONS` (the others keep their defaults); an
    unknown option raises ``TypeError``, an invalid value :class:`~arew.schema.ConfigError` (a
    ``ValueError``) naming it; the LLM settings are not read when ``user="offline"``."""
    unknown = sorted(k for k in options if k not in USER_OPTIONS)
    if unknown:
        raise TypeError(f"unknown user options {unknown}; known: {list(USER_OPTIONS)}")
    own = {key: spec.check(key, options.get(key, USER_DEFAULTS[key])) for key, spec in _OFFLINE_OPTIONS.items()}
    offline = OfflineUser(own["user_fact_threshold"], own["user_row_threshold"])
    if own["user"] == "offline":  # the LLM settings may stay in the config; they are not used
        return offline
    return LLMUser(LLM_USER_OPTIONS.build({k: v for k, v in options.items() if k in LLM_USER_OPTIONS.options}), offline)


__all__ = [
    "LLM_USER_OPTIONS",
    "PROCESS_STATS",
    "USER_DEFAULTS",
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
