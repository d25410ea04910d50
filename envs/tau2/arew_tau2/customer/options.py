"""The ``customer*`` options of ``arew_agent.env_options``: declared, checked and turned into a customer.

``customer`` picks the kind (``offline``, the default, or ``llm``); ``customer_<field>`` sets a
field of :class:`~arew_tau2.customer.llm.LLMCustomerConfig`, whose declarations are the
options' kinds, checks, documentation and defaults (:class:`arew.envs.options.PrefixedOptions`;
the generated table is in ``docs/reference/configuration.md``). The LLM settings are checked even
while the customer is offline, so a bad value fails at start-up.
"""

from __future__ import annotations

from typing import Any

from arew.envs.options import Option, PrefixedOptions
from arew_tau2.customer.base import Customer
from arew_tau2.customer.llm import LLMCustomer, LLMCustomerConfig
from arew_tau2.customer.offline import OfflineCustomer

CUSTOMER_KINDS = ("offline", "llm")
LLM_CUSTOMER_OPTIONS = PrefixedOptions(LLMCustomerConfig, LLMCustomerConfig.OPTION_PREFIX)
_KIND = Option(str, "simulated customer: offline (deterministic rules) or llm (an OpenAI-compatible server with tool calling)", choices=CUSTOMER_KINDS)

CUSTOMER_OPTIONS: dict[str, Option] = {"customer": _KIND, **LLM_CUSTOMER_OPTIONS.options}
CUSTOMER_DEFAULTS: dict[str, Any] = {"customer": "offline", **LLM_CUSTOMER_OPTIONS.defaults}


def _check(options: dict[str, Any], at: str) -> LLMCustomerConfig:
    """The LLM settings among the customer options ``options``, checked (errors name ``at.key``, or ``key``)."""
    if "customer" in options:
        _KIND.check(f"{at}.customer" if at else "customer", options["customer"])
    return LLM_CUSTOMER_OPTIONS.build({k: v for k, v in options.items() if k != "customer"}, at)


def check_customer_options(options: dict[str, Any], prefix: str) -> None:
    """Raise ValueError naming ``prefix.key`` for an invalid value of a customer option among
    ``options`` (other keys are left to the environment's OPTIONS check). The LLM settings are
    checked even while the customer is offline."""
    _check({k: v for k, v in options.items() if k in CUSTOMER_OPTIONS}, prefix)


def make_customer(task: Any, **options: Any) -> Customer:
    """The customer of ``task`` (a tau2 ``Task``) from the flat ``customer*`` options; an unknown
    option raises TypeError, an invalid value ValueError naming it."""
    unknown = sorted(k for k in options if k not in CUSTOMER_OPTIONS)
    if unknown:
        raise TypeError(f"unknown customer options {unknown}; known: {list(CUSTOMER_OPTIONS)}")
    config = _check(options, "")
    if options.get("customer", "offline") == "offline":
        return OfflineCustomer(task, config.max_tool_steps)
    return LLMCustomer(task, config)
