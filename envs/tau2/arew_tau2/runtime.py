"""The tau2 telecom package, imported once and quietly, and fresh per-episode environments.

Importing tau2 has two side effects that this module neutralises (import tau2 through it,
or after it):

- ``tau2.utils.utils`` calls ``dotenv.load_dotenv()`` at import, which reads the first
  ``.env`` found upwards from the *tau2 package folder* (so a checkout's ``.env`` would
  land in ``os.environ``) and logs a warning when there is none. The first import here runs
  with ``dotenv.load_dotenv`` replaced by a no-op for the duration of that one import (the
  name is bound by ``from dotenv import load_dotenv`` at import time, so nothing later
  calls the real one); the original is put back right after. Nothing here touches the
  network: litellm, ``tau2.registry`` and ``tau2.gym`` are never imported.
- loguru prints every tool response at DEBUG: ``logger.disable("tau2")``.

Per process, loaded once on first use (:func:`runtime`): the pristine agent and user
databases, the solo and dual-control policies (tau2's own documents, as
``get_environment`` assembles them), a catalogue of the 13 agent and 30 device tools
(:class:`ToolSpec`), and a pristine copy of ``TelecomUserTools.default_vpn_details``.

Per episode (:func:`new_environment`): deep copies of the databases, a ``TelecomEnvironment``
built directly (``get_environment(solo_mode=True)`` rebuilds 43 pydantic tool models per call
to check that no tool name is on both sides: 35-85 ms of the episode start; the names are
checked once per process here instead, and solo mode is set on the instance), and the
episode's own copy of ``default_vpn_details``. That attribute is one object on the class;
``connect_vpn`` puts that very object on the device and ``break_vpn`` (in the initial state
of 16 base tasks) then degrades it, so every later VPN connection in the process, in any
episode, got the broken server. Each episode's user toolkit now carries its own instance
attribute, copied from the pristine value, so within an episode tau2's behaviour is kept
(a reconnect after ``break_vpn`` is still poor, as in a fresh process) and nothing crosses
episodes. The pristine value is taken when this module is first imported.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from arew_tau2 import tools as tool_text


def _no_dotenv(*args: Any, **kwargs: Any) -> bool:
    return True


def _import_tau2_quietly() -> None:
    from loguru import logger

    logger.disable("tau2")
    if "tau2.utils.utils" in sys.modules:
        return
    import dotenv

    original = dotenv.load_dotenv
    dotenv.load_dotenv = _no_dotenv
    try:
        import tau2.utils.utils  # noqa: F401
    finally:
        dotenv.load_dotenv = original


_import_tau2_quietly()

from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import RewardType, Task  # noqa: E402
from tau2.domains.telecom.data_model import TelecomDB  # noqa: E402
from tau2.domains.telecom.environment import TelecomEnvironment, get_environment  # noqa: E402
from tau2.domains.telecom.tools import TelecomTools  # noqa: E402
from tau2.domains.telecom.user_data_model import TelecomUserDB  # noqa: E402
from tau2.domains.telecom.user_tools import TelecomUserTools  # noqa: E402
from tau2.domains.telecom.utils import TELECOM_DB_PATH, TELECOM_USER_DB_PATH  # noqa: E402
from tau2.evaluator.evaluator_communicate import CommunicateEvaluator  # noqa: E402

PRISTINE_VPN_DETAILS = TelecomUserTools.default_vpn_details.model_copy(deep=True)

# every module of arew_tau2 takes tau2's names from here, so tau2 is only ever imported quietly
__all__ = [
    "AssistantMessage", "CommunicateEvaluator", "RewardType", "SimulationRun", "Task", "TerminationReason", "ToolCall",
    "ToolMessage", "UserMessage", "TelecomEnvironment", "ToolSpec", "Runtime", "runtime", "new_environment",
]  # fmt: skip


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the agent sees it: its side ("assistant" or "user"), kind and parameters."""

    name: str
    side: str
    kind: str  # tau2's ToolType value: "read", "write", "generic" or "think"
    params: tuple[tuple[str, str, bool, Any], ...]  # (name, type shown, required, default)
    summary: str  # the first sentence of tau2's description
    schema: dict[str, Any]  # the OpenAI function schema tau2 gives it
    model: Any = field(default=None, compare=False, repr=False)  # tau2's pydantic model of the parameters

    @property
    def required(self) -> frozenset[str]:
        return frozenset(p[0] for p in self.params if p[2])

    @property
    def accepted(self) -> frozenset[str]:
        return frozenset(p[0] for p in self.params)

    def argument_problem(self, arguments: dict[str, Any]) -> str | None:
        """Why the arguments do not fit this tool (missing or unknown names, or strictly the wrong types: tau2 does
        not check, and a wrong type can corrupt the device state so that later checks crash), or None."""
        problem = tool_text.check_arguments(self.name, arguments, self.required, self.accepted)
        return problem or tool_text.type_problem(self.name, self.model, arguments)


def _type_text(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        target = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
        if "enum" in target:
            return "|".join(json.dumps(v) for v in target["enum"])
        return "object"
    if "enum" in prop:
        return "|".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        shown = [_type_text(p, defs) for p in prop["anyOf"]]
        # an enum or a free string: show the enum (the free string is for tolerance)
        enums = [s for s in shown if '"' in s]
        return enums[0] if enums else "|".join(dict.fromkeys(shown))
    return str(prop.get("type", "any"))


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    for end in (". ", "? ", "! "):
        cut = text.find(end)
        if cut != -1:
            text = text[: cut + 1]
            break
    return text


def _specs(toolkit: Any, side: str) -> dict[str, ToolSpec]:
    out = {}
    for name, tool in toolkit.get_tools().items():
        schema = tool.params.model_json_schema()
        defs = schema.get("$defs", {})
        required = set(schema.get("required", []))
        params = tuple(
            (key, _type_text(prop, defs), key in required, prop.get("default"))
            for key, prop in schema.get("properties", {}).items()
        )
        out[name] = ToolSpec(
            name=name,
            side=side,
            kind=toolkit.tool_type(name).value,
            params=params,
            summary=_first_sentence(tool.short_desc or name),
            schema=tool.openai_schema,
            model=tool.params,
        )
    return out


class Runtime:
    """What every episode of the process shares, read-only: databases, policies, tool catalogue."""

    def __init__(self) -> None:
        solo = get_environment(solo_mode=True)  # checks once that no tool name is on both sides
        dual = get_environment(solo_mode=False)
        self.policy = {True: solo.policy, False: dual.policy}
        self.agent_tools = _specs(dual.tools, "assistant")
        self.user_tools = _specs(dual.user_tools, "user")
        self.db = TelecomDB.load(TELECOM_DB_PATH)
        self.user_db = TelecomUserDB.load(TELECOM_USER_DB_PATH)

    def tools_for(self, solo: bool) -> dict[str, ToolSpec]:
        """The tools the agent may call: both sides in solo mode, the company's in dual control."""
        return {**self.agent_tools, **self.user_tools} if solo else dict(self.agent_tools)


_LOCK = threading.Lock()
_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    global _RUNTIME
    if _RUNTIME is None:
        with _LOCK:
            if _RUNTIME is None:
                _RUNTIME = Runtime()
    return _RUNTIME


def new_environment(task: Task | None, solo: bool) -> TelecomEnvironment:
    """A fresh telecom environment in ``task``'s initial state (the pristine state for None)."""
    rt = runtime()
    tools = TelecomTools(rt.db.model_copy(deep=True))
    user_tools = TelecomUserTools(rt.user_db.model_copy(deep=True))
    user_tools.default_vpn_details = PRISTINE_VPN_DETAILS.model_copy(deep=True)
    env = TelecomEnvironment(domain_name="telecom", policy=rt.policy[solo], tools=tools, user_tools=user_tools)
    env.solo_mode = solo
    state = task.initial_state if task is not None else None
    if state is not None:
        env.set_state(state.initialization_data, state.initialization_actions, list(state.message_history or []))
    return env
