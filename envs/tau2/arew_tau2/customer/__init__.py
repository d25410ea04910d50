"""The simulated customer of tau2 telecom in dual control: the person holding the phone.

The environment (:mod:`arew_tau2.env`) hands each agent message to ``customer.reply(message,
device)`` and shows the agent the returned turn (:mod:`~arew_tau2.customer.base`); the
customer operates the phone through ``device`` (:mod:`~arew_tau2.customer.device`). Two
customers, picked by the option ``customer`` (:mod:`~arew_tau2.customer.options`):
:class:`OfflineCustomer` (deterministic rules, :mod:`~arew_tau2.customer.offline`) and
:class:`LLMCustomer` (tau2's user simulator behind a server, :mod:`~arew_tau2.customer.llm`).
"""

from __future__ import annotations

from arew_tau2.customer.base import (
    OUT_OF_SCOPE,
    PROCESS_STATS,
    STOP,
    STOP_TOKENS,
    TRANSFER,
    Customer,
    CustomerStats,
    CustomerTurn,
    split_stop,
)
from arew_tau2.customer.device import Device, DeviceResult
from arew_tau2.customer.llm import FALLBACKS, LLMCustomer, LLMCustomerConfig
from arew_tau2.customer.offline import OfflineCustomer
from arew_tau2.customer.options import (
    CUSTOMER_DEFAULTS,
    CUSTOMER_KINDS,
    CUSTOMER_OPTIONS,
    check_customer_options,
    make_customer,
)

__all__ = [
    "CUSTOMER_DEFAULTS",
    "CUSTOMER_KINDS",
    "CUSTOMER_OPTIONS",
    "FALLBACKS",
    "OUT_OF_SCOPE",
    "PROCESS_STATS",
    "STOP",
    "STOP_TOKENS",
    "TRANSFER",
    "Customer",
    "CustomerStats",
    "CustomerTurn",
    "Device",
    "DeviceResult",
    "LLMCustomer",
    "LLMCustomerConfig",
    "OfflineCustomer",
    "check_customer_options",
    "make_customer",
    "split_stop",
]
