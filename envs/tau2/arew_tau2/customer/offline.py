"""The offline customer (``customer: offline``, the default): deterministic rules, no network.

For each agent message (normalised as :func:`arew_tau2.customer.reading.normalise` says), in order:

1. Its first reply starts with the scenario's reason for the call, in the first person.
2. A transfer to a human or another agent ("transfer" and "agent", "human", "specialist"...)
   ends the call with ``###TRANSFER###``.
3. A question about identity (phone number, name, account, verify your identity...) is
   answered with the known-info sentences that name the customer or a phone number; one about
   location (abroad, travelling, country...) with those that say where the customer is; "how
   can I help / what is the problem" repeats the reason for the call. An offer to refuel data
   is accepted with the amount the scenario's instructions allow, a change of plan declined
   when they say so.
4. What the message asks of the phone, as :mod:`arew_tau2.customer.reading` reads it
   (:func:`~arew_tau2.customer.reading.requests`).
5. An action runs the feature's write tool via ``device.call`` and is reported in one sentence
   with the tool's output. Arguments come from the message alone: for the network mode, the one
   mode the message names (4G/5G preferred, 4G only, 3G only, 2G only), else it asks which; for
   app permissions, each permission the message names for the app it names (the messaging app
   when it names none and the customer's problem is MMS or the permission is SMS), else it asks;
   for the APN, ``reset_apn_settings`` when the request says reset/default/restore, else it
   asks; a VPN goes by connect/disconnect (on/off), else its status is read. An explicit
   direction ("turn airplane mode off") is checked first with the feature's read tool, and
   nothing is toggled when the phone is already so; "toggle", or both "on" and "off", toggles
   without looking. The customer never reads the task's expected actions.
6. A reading runs the feature's read tool (``check_status_bar``, ``can_send_mms``,
   ``run_speed_test``...) and relays its output; each (tool, arguments) at most once per reply.
7. The goal is the scenario's success reading (:func:`goal_of`): ``can_send_mms`` says it can
   send (MMS tasks), ``run_speed_test`` says Excellent (mobile data), the status bar shows signal
   (no service). When the agent says the issue is fixed or asks to try again (outside a keyword
   salad) and the goal reading was not taken in this reply, the customer takes it. A goal reading that succeeds
   ends the call with ``###STOP###``; one that fails says it is still not fixed.
8. A goodbye ("goodbye", "bye", "have a great day", "take care") ends the call with
   ``###STOP###``; so does "anything else?" after the goal was reached.
9. Otherwise it asks what to do on the phone.

At most ``max_tool_steps`` device calls per reply (default 8); intents beyond are dropped. It is
deterministic in (task, conversation, device outputs) and never raises.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from arew_tau2.customer import prompts
from arew_tau2.customer.base import STOP, TRANSFER, CustomerStats, CustomerTurn, count
from arew_tau2.customer.device import MAX_OUTPUT_CHARS, Device, DeviceResult, call_safely
from arew_tau2.customer.reading import PARENTHESES, TOGGLE_STATE, Feature, Reading, claims_fixed, normalise, sentences
from arew_tau2.customer.reading import direction as direction_of

logger = logging.getLogger(__name__)


def first_person(text: str) -> str:
    """The scenario's second person as the customer's first person ("You are" -> "I am")."""
    rules = (
        (r"\bYou (?=mobile\b)", "My "),
        (r"\bYou are\b", "I am"),
        (r"\byou are\b", "I am"),
        (r"\bYou're\b", "I'm"),
        (r"\byou're\b", "I'm"),
        (r"\bYour\b", "My"),
        (r"\byour\b", "my"),
        (r"\byourself\b", "myself"),
        (r"\bYou\b", "I"),
        (r"\byou\b", "I"),
    )
    for pattern, replacement in rules:
        text = re.sub(pattern, replacement, text)
    return " ".join(text.split())


_MODES = (
    ("4g_5g_preferred", re.compile(r"\b(?:4g[ /_-]*5g|5g[ /_-]*4g|5g)(?:[ _-]*preferred)?\b")),
    ("4g_only", re.compile(r"\b(?:4g|lte)(?:[ /_-]*lte)?[ _-]*only\b")),
    ("3g_only", re.compile(r"\b3g\b")),
    ("2g_only", re.compile(r"\b2g\b")),
)
_APPS = (("messaging", re.compile(r"\bmessag\w*|\bsms app|\btext(?:ing)? app")), ("browser", re.compile(r"\bbrowser\b|\bchrome\b")))
_PERMISSIONS = (
    ("sms", re.compile(r"\bsms\b|\btext messag\w*")),
    ("storage", re.compile(r"\bstorage\b")),
    ("camera", re.compile(r"\bcamera\b")),
    ("location", re.compile(r"\blocation\b")),
    ("contacts", re.compile(r"\bcontacts?\b")),
    ("microphone", re.compile(r"\bmicrophone\b")),
    ("network", re.compile(r"\bnetwork (?:access|permission)")),
    ("phone", re.compile(r"\bphone (?:permission|access)|permission (?:for|to) (?:the )?phone\b")),
)
_RESET_WORDS = re.compile(r"\b(?:reset\w*|default\w*|restor\w*|revert\w*|original|factory)\b")

_IDENTITY = re.compile(
    r"phone number|(?:mobile|cell|telephone|line|account|contact) number|your number|your (?:full )?name|(?:full|first|last) name"
    r"|name on (?:the|your) account|\byour account\b|\baccount (?:number|holder|details)|identif\w*"
    r"|\bidentity\b|customer id|who (?:am i|i am) speaking|authenticat\w*|look (?:you|your account) up|verify (?:you\b|your (?:identity|account|details))"
)
_LOCATION = re.compile(r"\babroad\b|\btravel\w*|where are you|(?:which|what) country|\bcountry\b|(?:your|current) location|\boverseas\b|\blocated\b|\binternational\w*")
_REASON = re.compile(
    r"how (?:can|may) i help|what (?:seems to be|is) the (?:problem|issue|trouble)|what can i do for you|what brings you"
    r"|reason for (?:your |the )?call|describe (?:the|your) (?:problem|issue)|what(?:'s| is) (?:going on|wrong|happening)"
)
_REFUEL_OFFER = re.compile(r"\brefuel\w*|\btop[ -]?up\b|\badd (?:more |extra |some )?(?:\d+(?:\.\d+)? ?gb (?:of )?)?data\b|\b(?:more|extra) data\b")
_PLAN_OFFER = re.compile(r"\b(?:change|upgrade|switch|new|different|another|better) (?:\w+ ){0,3}plan\b")
_REFUEL_OK = re.compile(r"willing to refuel (\d+(?:\.\d+)?) ?gb", re.I)
_PLAN_NO = re.compile(r"(?:not|n't) want to change (?:your |the )?(?:mobile )?(?:data )?plan", re.I)
_TRANSFER = re.compile(r"\btransfer\w*\b")
_TRANSFER_TO = re.compile(r"\b(?:human|agent|specialist|representative|department|colleague|team|supervisor|technician|person)\b")
_GOODBYE = re.compile(r"\b(?:good ?bye|bye|farewell|take care)\b|have a (?:great|good|nice|wonderful|lovely) (?:day|evening|night|one|weekend)")
_ANYTHING_ELSE = re.compile(r"anything else")
def _has_signal(output: str) -> bool:
    return "📶" in output and "no signal" not in output.lower() and "airplane" not in output.lower()


# the scenario's success reading, chosen by a phrase of the reason for the call, else of the instructions
_GOALS = (
    ("mms", "can_send_mms", lambda out: "can send mms" in out.lower() and "cannot" not in out.lower()),
    ("speed test", "run_speed_test", lambda out: "excellent" in out.lower()),
    ("mobile data", "run_speed_test", lambda out: "excellent" in out.lower()),
    ("signal", "check_status_bar", _has_signal),
    ("no service", "check_status_bar", _has_signal),
)


def _instructions(task: Any) -> tuple[str, str, str]:
    """(reason for the call, known info, task instructions) of a task's user scenario."""
    scenario = getattr(task, "user_scenario", None)
    instructions = getattr(scenario, "instructions", None)
    if isinstance(instructions, str):
        return instructions, "", instructions
    return (
        str(getattr(instructions, "reason_for_call", "") or ""),
        str(getattr(instructions, "known_info", "") or ""),
        str(getattr(instructions, "task_instructions", "") or ""),
    )


def goal_of(task: Any) -> tuple[str, Any] | None:
    """The scenario's success reading: (read tool, check of its output), or None."""
    reason, _, rules = _instructions(task)
    scopes = (reason.lower(), rules.lower())  # the reason first: the rules cite other tools as examples
    return next(((tool, check) for scope in scopes for key, tool, check in _GOALS if key in scope), None)


def _matches(action: tuple[str, dict, Any], name: str, arguments: dict) -> bool:
    expected_name, expected_args, compare = action
    if name != expected_name:
        return False
    keys = expected_args.keys() if compare is None else compare
    return all(arguments.get(k) == expected_args.get(k) for k in keys)


def _clip(output: str) -> str:
    text = " ".join(str(output).split())
    return text if len(text) <= MAX_OUTPUT_CHARS else text[: MAX_OUTPUT_CHARS - 3] + "..."


class OfflineCustomer:
    """The deterministic customer of a task (rules in the module docstring)."""

    def __init__(self, task: Any, max_tool_steps: int = 8, stats: CustomerStats | None = None):
        self.reason, self.known, self.rules = _instructions(task)
        criteria = getattr(task, "evaluation_criteria", None)
        actions = list(getattr(criteria, "actions", None) or [])
        # the expected user-side actions: only what :meth:`pending` reports (tests and diagnostics); never the replies' arguments
        self.expected = [
            (str(a.name), dict(a.arguments or {}), a.compare_args) for a in actions if getattr(a, "requestor", "assistant") == "user"
        ]
        self.max_tool_steps = int(max_tool_steps)
        self.stats = stats if stats is not None else CustomerStats()
        known = sentences(self.known)
        self.identity = [s for s in known if re.search(r"\d{3}-\d{3}-\d{4}|\bYou are [A-Z]", s)]
        self.location = [s for s in known if re.search(r"\babroad\b|\bat home\b|\bcurrently in\b|\blocated\b", s)]
        self.goal = goal_of(task)
        refuel = _REFUEL_OK.search(self.rules)
        self.refuel_amount = refuel.group(1) if refuel else None
        self.keeps_plan = bool(_PLAN_NO.search(self.rules))
        self.performed: list[tuple[str, dict]] = []
        self.turns = 0
        self.goal_reached = False

    def pending(self) -> list[tuple[str, dict, Any]]:
        """Expected user-side actions that no call of this customer has matched yet."""
        return [a for a in self.expected if not any(_matches(a, n, args) for n, args in self.performed)]

    def observe(self, agent_message: Any, calls: list[tuple[str, dict, DeviceResult]]) -> None:
        """Keep in step with a turn answered by someone else (the LLM customer)."""
        self.turns += 1
        for name, arguments, result in calls:
            self._record(name, arguments, result)

    def _record(self, name: str, arguments: dict, result: DeviceResult) -> None:
        self.performed.append((name, dict(arguments)))
        if self.goal and name == self.goal[0] and not result.error and self.goal[1](result.content):
            self.goal_reached = True

    async def reply(self, agent_message: str, device: Device) -> CustomerTurn:
        count(self.stats, "calls")
        return self.respond(agent_message, device)

    def respond(self, agent_message: Any, device: Any, done: tuple | list = ()) -> CustomerTurn:
        """This turn's reply; ``done``: (name, arguments, result) calls already made in this turn."""
        try:
            return self._respond(normalise(agent_message), device, list(done))
        except Exception as exc:  # the rules must never crash a rollout
            logger.exception("offline customer failed on %r", str(agent_message)[:80])
            return CustomerTurn(prompts.NEUTRAL, None, "offline", f"{type(exc).__name__}: {exc}")

    def _respond(self, text: str, device: Any, done: list) -> CustomerTurn:
        first = self.turns == 0
        self.turns += 1
        parts: list[str] = []
        if first or _REASON.search(text):
            parts.append("Hi. " + first_person(self.reason) if first else first_person(self.reason))
        if _TRANSFER.search(text) and _TRANSFER_TO.search(text):
            return CustomerTurn(" ".join(parts + [prompts.TRANSFERRED]), TRANSFER, "offline")
        if _IDENTITY.search(text) and self.identity:
            parts.append(" ".join(first_person(s) for s in self.identity))
        if _LOCATION.search(text) and self.location:
            parts.append(" ".join(first_person(s) for s in self.location))
        if self.refuel_amount and _REFUEL_OFFER.search(text):
            parts.append(prompts.REFUEL_YES.format(amount=self.refuel_amount))
        if self.keeps_plan and _PLAN_OFFER.search(text):
            parts.append(prompts.PLAN_NO)
        turn = _Turn(self, device, done)
        plain = PARENTHESES.sub(" ", text)  # arguments are named outside examples in parentheses
        reading = Reading(text)
        for kind, feature, window in reading.intents():
            if turn.full():
                break
            if kind == "write":
                parts.append(turn.write(feature, plain, window))
            else:
                parts.append(turn.read(feature, plain))
        parts = [p for p in parts if p]
        stop = None
        goal_reading = turn.goal_reading()
        if self.goal and goal_reading is None and claims_fixed(reading) and not turn.full():
            parts.append(turn.read_tool(self.goal[0], {}))
            goal_reading = turn.goal_reading()
        if goal_reading is not None:
            if goal_reading:
                parts.append(prompts.GOAL_REACHED)
                stop = STOP
            else:
                parts.append(prompts.GOAL_NOT_REACHED)
        if stop is None and (_GOODBYE.search(text) or (self.goal_reached and _ANYTHING_ELSE.search(text))):
            parts.append(prompts.GOODBYE)
            stop = STOP
        return CustomerTurn(" ".join(parts) if parts else prompts.NEUTRAL, stop, "offline")


class _Turn:
    """The device calls of one offline reply: bounded, deduplicated reads, reports."""

    def __init__(self, customer: OfflineCustomer, device: Any, done: list):
        self.customer = customer
        self.device = device
        self.done = done  # (name, arguments, result) made earlier in this turn (by the LLM)
        self.calls = 0
        self.reads: dict[tuple[str, str], DeviceResult] = {}
        self.goal_result: DeviceResult | None = None

    def full(self) -> bool:
        return self.calls >= self.customer.max_tool_steps

    def goal_reading(self) -> bool | None:
        goal = self.customer.goal
        if goal is None or self.goal_result is None:
            return None
        return not self.goal_result.error and goal[1](self.goal_result.content)

    def call(self, name: str, arguments: dict) -> DeviceResult:
        for done_name, done_args, result in self.done:
            if done_name == name and done_args == arguments:
                return result  # the LLM already did this in this turn
        self.calls += 1
        count(self.customer.stats, "tool_calls")
        result = call_safely(self.device, name, arguments)
        if result.error:
            count(self.customer.stats, "tool_errors")
        self.customer._record(name, arguments, result)
        if self.customer.goal and name == self.customer.goal[0]:
            self.goal_result = result
        return result

    def read_tool(self, name: str, arguments: dict) -> str:
        key = (name, repr(sorted(arguments.items())))
        if key in self.reads:
            return ""
        self.reads[key] = result = self.call(name, arguments)
        template = prompts.FAILED if result.error else prompts.READ
        return template.format(output=_clip(result.content))

    def read(self, feature: Feature, text: str) -> str:
        if feature.read in ("check_app_permissions", "check_app_status"):
            app = self._app(text)
            return self.read_tool(feature.read, {"app_name": app}) if app else prompts.ASK_APP
        return self.read_tool(feature.read, {})

    def _app(self, text: str, permissions: tuple[str, ...] = ()) -> str | None:
        """The app the message names; else the messaging app when the customer's problem is MMS or the permission is SMS."""
        named = [app for app, pattern in _APPS if pattern.search(text)]
        if named:
            return named[0]
        mms = self.customer.goal is not None and self.customer.goal[0] == "can_send_mms"
        return "messaging" if mms or "mms" in text or "sms" in permissions else None

    def report(self, name: str, arguments: dict) -> str:
        result = self.call(name, arguments)
        return (prompts.FAILED if result.error else prompts.DONE).format(output=_clip(result.content))

    def write(self, feature: Feature, text: str, window: str) -> str:
        tool = feature.write
        if tool == "set_network_mode_preference":
            named = [mode for mode, pattern in _MODES if pattern.search(text)]
            return self.report(tool, {"mode": named[0]}) if len(named) == 1 else prompts.ASK_MODE
        if tool == "grant_app_permission":
            return self._grant(text)
        if tool == "apn":
            return self.report("reset_apn_settings", {}) if _RESET_WORDS.search(window) else prompts.ASK_APN
        if tool == "vpn":
            direction = direction_of(window)
            if direction is None:
                return self.read_tool("check_vpn_status", {})
            return self.report("connect_vpn" if direction == "on" else "disconnect_vpn", {})
        if tool in TOGGLE_STATE:
            direction = None if re.search(r"\btoggl\w*", window) else direction_of(window)
            if direction is not None:
                if self.calls + 2 > self.customer.max_tool_steps:
                    return ""  # no room to look before switching: the intent is dropped, like the ones after a full turn
                read_tool, pattern = TOGGLE_STATE[tool]
                state = self.call(read_tool, {})
                found = pattern.search(state.content.lower()) if not state.error else None
                if found:
                    current = "on" if found.group(1) in ("on", "yes") else "off"
                    if current == direction:
                        return prompts.ALREADY.format(state=current)
        return self.report(tool, {})

    def _grant(self, text: str) -> str:
        named = tuple(perm for perm, pattern in _PERMISSIONS if pattern.search(text))
        app = self._app(text, named)
        if not named or app is None:
            return prompts.ASK_PERMISSION
        reports = []
        for permission in named:
            if self.full():
                break
            arguments = {"app_name": app, "permission": permission}
            if ("grant_app_permission", arguments) in self.customer.performed:
                reports.append(prompts.ALREADY_GRANTED.format(app=app, permission=permission))
            else:
                reports.append(self.report("grant_app_permission", arguments))
        return " ".join(reports)
