"""The ``customer*`` options of ``arew_agent.env_options``: declared, checked and turned into a customer.

``customer`` picks the kind (``offline``, the default, or ``llm``); ``customer_<field>`` sets a
field of :class:`~arew.envs.tau2.customer.llm.LLMCustomerConfig`, whose defaults they are. The
LLM settings are checked even while the customer is offline, so a bad value fails at start-up.
"""

from __future__ import annotations

from typing import Any

from arew.envs.options import Option
from arew.envs.tau2.customer.base import Customer
from arew.envs.tau2.customer.llm import FALLBACKS, LLMCustomer, LLMCustomerConfig
from arew.envs.tau2.customer.offline import OfflineCustomer

CUSTOMER_KINDS = ("offline", "llm")

_DOCS = {
    "url": "base URL of the customer's OpenAI-compatible server, which must do tool calling (vLLM: --enable-auto-tool-choice --tool-call-parser); replicas: comma-separated",
    "model": "served model name of the customer",
    "timeout": "seconds per request attempt, the wait for a concurrency slot included",
    "max_retries": "further attempts after a timeout, refused connection or HTTP 408/429/5xx",
    "backoff": "first wait in seconds between attempts (doubles per attempt)",
    "max_backoff": "longest wait in seconds between attempts",
    "concurrency": "requests in flight per process and endpoint (shared with every client of that URL)",
    "api_key": "bearer token, if the server wants one",
    "max_response_bytes": "longest reply body read (longer: fallback)",
    "breaker_failures": "consecutive failed attempts that open the endpoint's circuit",
    "breaker_cooldown": "seconds the circuit stays open before one probe request",
    "temperature": "the customer's sampling temperature (tau2: 0)",
    "max_tokens": "length cap of each customer reply or tool-call turn",
    "max_tool_steps": "device calls per reply at most (LLM: beyond it the turn falls back; offline: further intents are dropped)",
    "fallback": "reply when the LLM fails: offline (the offline customer's reply) or repeat (ask the agent to repeat)",
}
_LLM_FIELDS = tuple(LLMCustomerConfig.__dataclass_fields__)
_LOW = {"timeout": 0.0, "backoff": 0.0, "max_backoff": 0.0, "breaker_cooldown": 0.0, "temperature": 0.0, "max_retries": 0}


def _option(name: str) -> Option:
    default = LLMCustomerConfig.__dataclass_fields__[name].default
    kind = str if default is None or isinstance(default, str) else type(default)
    choices = FALLBACKS if name == "fallback" else ()
    return Option(kind, _DOCS.get(name, name), choices=choices, low=_LOW.get(name, 1 if kind is int else None), nullable=default is None)


CUSTOMER_OPTIONS: dict[str, Option] = {
    "customer": Option(str, "simulated customer: offline (deterministic rules) or llm (an OpenAI-compatible server with tool calling)", choices=CUSTOMER_KINDS),
    **{f"customer_{name}": _option(name) for name in _LLM_FIELDS},
}
CUSTOMER_DEFAULTS: dict[str, Any] = {"customer": "offline", **{f"customer_{n}": LLMCustomerConfig.__dataclass_fields__[n].default for n in _LLM_FIELDS}}


def _coerce(name: str, value: Any) -> Any:
    """A YAML int for a float option is that float."""
    default = LLMCustomerConfig.__dataclass_fields__[name].default
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _check(options: dict[str, Any], label) -> LLMCustomerConfig:
    for key, value in options.items():
        CUSTOMER_OPTIONS[key].check(label(key), value)
    llm = {k[len("customer_") :]: _coerce(k[len("customer_") :], v) for k, v in options.items() if k != "customer"}
    try:
        return LLMCustomerConfig(**llm)
    except (TypeError, ValueError) as error:
        message = str(error)
        key = message.split(":", 1)[0]
        raise ValueError(label(key) + message[len(key) :] if key in CUSTOMER_OPTIONS else message) from None


def check_customer_options(options: dict[str, Any], prefix: str) -> None:
    """Raise ValueError naming ``prefix.key`` for an invalid value of a customer option among
    ``options`` (other keys are left to the environment's OPTIONS check). The LLM settings are
    checked even while the customer is offline."""
    mine = {k: v for k, v in options.items() if k in CUSTOMER_OPTIONS}
    _check(mine, lambda key: f"{prefix}.{key}")


def make_customer(task: Any, **options: Any) -> Customer:
    """The customer of ``task`` (a tau2 ``Task``) from the flat ``customer*`` options; an unknown
    option raises TypeError, an invalid value ValueError naming it."""
    unknown = sorted(k for k in options if k not in CUSTOMER_OPTIONS)
    if unknown:
        raise TypeError(f"unknown customer options {unknown}; known: {list(CUSTOMER_OPTIONS)}")
    config = _check(options, lambda key: key)
    if options.get("customer", "offline") == "offline":
        return OfflineCustomer(task, config.max_tool_steps)
    return LLMCustomer(task, config)

