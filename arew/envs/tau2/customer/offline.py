"""The offline customer (``customer: offline``, the default): deterministic rules, no network.

For each agent message (lower-cased; "Wi-Fi", "flight mode", "re-seat"... normalised; the first
:data:`MAX_MESSAGE_CHARS` characters read), in order:

1. Its first reply starts with the scenario's reason for the call, in the first person.
2. A transfer to a human or another agent ("transfer" and "agent", "human", "specialist"...)
   ends the call with ``###TRANSFER###``.
3. A question about identity (phone number, name, account, verify your identity...) is
   answered with the known-info sentences that name the customer or a phone number; one about
   location (abroad, travelling, country...) with those that say where the customer is; "how
   can I help / what is the problem" repeats the reason for the call. An offer to refuel data
   is accepted with the amount the scenario's instructions allow, a change of plan declined
   when they say so.
4. Phone features are found by keyword patterns (:data:`FEATURES`: airplane mode, mobile data,
   roaming, data saver, Wi-Fi, Wi-Fi calling, network mode, APN, VPN, SIM, reboot, app
   permissions, MMS, speed test, status bar, network status, installed apps, payment). Each
   mention is an action or a question by the nearest verb before it in its sentence (toggle,
   turn, switch, enable, reset, grant, set, pay, use... act; check, look, what, is, does, try,
   run... ask; a "set" right after is/are asks; "don't", "do not", "no need to" just before the
   verb cancel the mention; with no verb before it, "needs to be turned..." after it acts,
   anything else asks). Features are taken in the order of their first mention, one intent per
   feature (an action if any mention is one).
5. An action runs the feature's write tool via ``device.call`` and is reported in one sentence
   with the tool's output. Arguments: for the network mode, the one mode the message names
   (4G/5G preferred, 4G only, 3G only, 2G only), else the pending expected user-side action's
   mode (also the expected one among several named), else it asks; for app permissions, every
   pending expected ``grant_app_permission`` whose permission the message names (all pending
   ones when it names none), else the app and permission named, else it asks; for the APN,
   ``reset_apn_settings`` when the message says reset/default/restore, else it asks; a VPN goes
   by connect/disconnect (on/off). An explicit direction ("turn airplane mode off") is checked
   first with the feature's read tool, and nothing is toggled when the phone is already so;
   "toggle", or both "on" and "off", toggles without looking.
6. A question runs the feature's read tool (``check_status_bar``, ``can_send_mms``,
   ``run_speed_test``...) and relays its output; each (tool, arguments) at most once per reply.
7. The goal is the scenario's success reading: ``can_send_mms`` says it can send (MMS tasks),
   ``run_speed_test`` says Excellent (mobile data), the status bar shows signal (no service).
   When the agent says the issue is fixed or asks to try again and the goal reading was not
   taken in this reply, the customer takes it. A goal reading that succeeds ends the call with
   ``###STOP###``; one that fails says it is still not fixed.
8. A goodbye ("goodbye", "bye", "have a great day", "take care") ends the call with
   ``###STOP###``; so does "anything else?" after the goal was reached.
9. Otherwise it asks what to do on the phone.

At most ``max_tool_steps`` device calls per reply (default 8); intents beyond are dropped. It is
deterministic in (task, conversation, device outputs) and never raises.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from arew.envs.tau2.customer import prompts
from arew.envs.tau2.customer.base import STOP, TRANSFER, CustomerStats, CustomerTurn, count
from arew.envs.tau2.customer.device import MAX_OUTPUT_CHARS, Device, DeviceResult, call_safely

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000


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


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text or "") if s.strip()]


@dataclass(frozen=True)
class _Feature:
    name: str
    pattern: re.Pattern
    write: str | None  # the write tool (or a chooser's key), None for read-only features
    read: str | None  # the read tool


def _feature(name: str, patterns: str, write: str | None, read: str | None) -> _Feature:
    return _Feature(name, re.compile(patterns), write, read)


# longest match wins where mentions overlap ("data roaming" over "data", "wifi calling" over "wifi")
FEATURES = (
    _feature("wifi_calling", r"wifi[ -]?call\w*|vowifi|calls? over wifi|calling over wifi", "toggle_wifi_calling", "check_wifi_calling_status"),
    _feature("data_saver", r"data[ -]?saver(?: mode)?|data restrictions?|restrict\w* (?:\w+ )?data|data[ -]limiting|low data mode", "toggle_data_saver_mode", "check_data_restriction_status"),
    _feature("roaming", r"(?:data )?roaming", "toggle_roaming", "check_network_status"),
    _feature("airplane", r"airplane(?: mode)?", "toggle_airplane_mode", "check_network_status"),
    _feature(
        "network_mode",
        r"network (?:mode|type|preference|generation|setting)s?(?: preference)?|preferred network(?: type| mode)?"
        r"|\b[2345]g(?:[ /_-]+(?:[2345]g|lte))*(?:[ _-]+(?:only|preferred))?\b|\blte\b",
        "set_network_mode_preference",
        "check_network_mode_preference",
    ),
    _feature("apn", r"\bapns?\b(?: settings?)?|access point(?: names?)?(?: settings?)?|\bmmsc\b", "apn", "check_apn_settings"),
    _feature("vpn", r"\bvpn\b(?: connection)?|virtual private network", "vpn", "check_vpn_status"),
    _feature("sim", r"\bsim(?: card)?s?\b|\bsim tray\b", "reseat_sim_card", "check_sim_status"),
    _feature(
        "reboot",
        r"\breboot(?:ing)?\b|\brestart(?:ing)?\b|\bpower[ -]?cycl\w*"
        r"|\b(?:turn|switch|power)\w* (?:your |the )?(?:phone |device |it )?off and (?:then )?(?:back )?on",
        "reboot_device",
        None,
    ),
    _feature("permission", r"\bpermissions?\b|\baccess to\b", "grant_app_permission", "check_app_permissions"),
    _feature("installed_apps", r"installed apps?|apps? (?:are )?installed|(?:what|which) apps", None, "check_installed_apps"),
    _feature("app_status", r"app(?:'s)? (?:status|details|info\w*)", None, "check_app_status"),
    _feature(
        "mms",
        r"\bmms\b|picture messag\w*|multimedia messag\w*|photo messag\w*|send(?:ing)? (?:a |an )?(?:photo|picture|image)",
        None,
        "can_send_mms",
    ),
    _feature("speed", r"speed ?test|internet speed|\bspeed\b|\bbrows\w*|load (?:a )?(?:web ?page|website)", None, "run_speed_test"),
    _feature("status_bar", r"status bar|top of (?:your|the) screen|\bicons?\b|signal bars?", None, "check_status_bar"),
    _feature(
        "network_status",
        r"network status|connection status|\bsignal\b|\bservice\b|cellular (?:connection|network)|\bconnected\b",
        None,
        "check_network_status",
    ),
    _feature("payment", r"payment(?: requests?)?s?|\bpay\b|\bbills?\b|\binvoice\b", "make_payment", "check_payment_request"),
    _feature("wifi", r"\bwifi\b|\bwireless\b", "toggle_wifi", "check_wifi_status"),
    _feature("mobile_data", r"(?:mobile|cellular) data(?: connection)?|data connection|mobile internet|\bdata\b", "toggle_data", "check_network_status"),
    # amounts and plans of data: swallowed so that "2 GB of data" is not mobile data
    _feature(
        "data_amount",
        r"(?:\d+(?:\.\d+)? ?)?(?:gb|gigabytes?|mb|megabytes?) of (?:mobile )?data|(?:more|extra|additional|some) data"
        r"|data (?:plans?|usage|limits?|allowance|balance|caps?|refuel\w*|top[ -]?ups?|packages?)|refuel\w* (?:\w+ ){0,3}data",
        None,
        None,
    ),
)

_WRITE_CUE = (
    r"toggl\w*|turn(?:ing)?|switch(?:ing)?|flip(?:ping)?|enabl(?:e|ing)|disabl(?:e|ing)|activat(?:e|ing)|deactivat(?:e|ing)"
    r"|reset(?:ting)?|restor(?:e|ing)|revert(?:ing)?|reseat(?:ing)?|remov(?:e|ing)|reinsert(?:ing)?|insert(?:ing)?|take|taking|pull|pop"
    r"|grant(?:ing)?|give|giving|allow(?:ing)?|set(?:ting)?|chang(?:e|ing)|connect(?:ing)?|disconnect(?:ing)?|pay(?:ing)?"
    r"|make|making|accept|approve|configure|updat(?:e|ing)|select|choose|put|use|using|reboot(?:ing)?|restart(?:ing)?|simulat(?:e|ing)"
)
_READ_CUE = (
    r"check\w*|look\w*|see|seeing|tell|what|which|whether|if|is|are|does|do|did|has|have|confirm|verify|show|shows|read"
    r"|run|running|test|testing|try|trying|open|report|say|says|display\w*|can|could"
)
_CUES = re.compile(rf"\b(?:(?P<write>{_WRITE_CUE})|(?P<read>{_READ_CUE}))\b")
_NEGATION = re.compile(r"\b(?:don't|dont|do not|never|no need to|not)\s+(?:\w+\s+)?$")
_QUESTION_BEFORE = re.compile(r"\b(?:do|did|does|are|were|have|has)\s+(?:you|it|i)\s+$")
_BE_BEFORE = re.compile(r"\b(?:is|are|be|been|was|were|it's|currently)\s+$")
_PASSIVE_WRITE = re.compile(r"^\W*(?:\w+\W+){0,3}?(?:needs?|has|have|should|must|ought) to be (?:turned|switched|set|changed|reset|enabled|disabled|toggled|on|off)")
_SENTENCE_END = re.compile(r"[.!?;\n]+(?=\s|$)")
_ON = re.compile(r"\b(?:on|enable|enabling|enabled|activate|activating|connect|connecting)\b")
_OFF = re.compile(r"\b(?:off|disable|disabling|disabled|deactivate|deactivating|disconnect\w*)\b")
_NOT_DIRECTION = re.compile(r"\bon (?:your|the|my|its|this|that)\b")

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
# toggles whose state can be read before a directed request ("turn X off")
_TOGGLE_STATE = {
    "toggle_airplane_mode": ("check_network_status", re.compile(r"airplane mode:\s*(on|off)")),
    "toggle_data": ("check_network_status", re.compile(r"mobile data enabled:\s*(yes|no)")),
    "toggle_roaming": ("check_network_status", re.compile(r"data roaming enabled:\s*(yes|no)")),
    "toggle_wifi": ("check_wifi_status", re.compile(r"wi-fi is (?:currently )?(?:turned )?(on|off)")),
    "toggle_wifi_calling": ("check_wifi_calling_status", re.compile(r"wi-fi calling is (?:currently )?(?:turned )?(on|off)")),
    "toggle_data_saver_mode": ("check_data_restriction_status", re.compile(r"data saver mode is (?:currently )?(?:turned )?(on|off)")),
}
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
_FIX_CLAIM = re.compile(
    r"\b(?:fixed|resolved|solved|sorted)\b|should (?:now |be )?(?:work|working|fine|good|back|resolved|fixed)"
    r"|working (?:now|again)|\bworks? (?:now|again)\b|(?:see|check|test) (?:if|whether) (?:it|that|the issue|the problem|everything|things)|(?:is|does) it work|try (?:it |that )?(?:again|now)|test (?:it|that|again)"
    r"|(?:can|could) you (?:now )?(?:try|test)|see if (?:it|that|the issue|the problem|everything)|check if (?:it|that|the issue|the problem|everything)"
)


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


def normalise(text: Any) -> str:
    text = text if isinstance(text, str) else ""
    text = text[:MAX_MESSAGE_CHARS].lower().replace("\u2019", "'").replace("_", " ")
    text = re.sub(r"\bwi[\s-]?fi\b", "wifi", text)
    text = re.sub(r"\bre[\s-](seat|insert|start|boot)", r"re\1", text)
    text = re.sub(r"\b(?:aero|air)[\s-]?plane\b", "airplane", text)
    text = re.sub(r"\bflight mode\b", "airplane mode", text)
    return text


@dataclass(frozen=True)
class _Mention:
    feature: _Feature
    start: int
    end: int


def _mentions(text: str) -> list[_Mention]:
    found = [_Mention(f, m.start(), m.end()) for f in FEATURES for m in f.pattern.finditer(text) if m.end() > m.start()]
    found.sort(key=lambda m: (m.start - m.end, m.start))
    taken: list[_Mention] = []
    for mention in found:
        if all(mention.end <= t.start or mention.start >= t.end for t in taken):
            taken.append(mention)
    return sorted(taken, key=lambda m: m.start)


def _mode(text: str, mention: _Mention, cues: list[re.Match], bounds: list[int]) -> tuple[str | None, str]:
    """("write", "read" or None to ignore the mention; the text where a direction may be said)."""
    sentence_start = max((b for b in bounds if b <= mention.start), default=0)
    sentence_end = min((b for b in bounds if b > mention.start), default=len(text))
    if mention.feature.name == "reboot":  # the mention is itself the verb
        before = text[sentence_start : mention.start]
        return (None if _NEGATION.search(before) else "write"), text[mention.start : sentence_end]
    before = [c for c in cues if sentence_start <= c.start() and c.end() <= mention.start]
    window = text[mention.start : min(sentence_end, mention.end + 30)]
    if before:
        cue = before[-1]
        if _NEGATION.search(text[sentence_start : cue.start()]):
            return None, window
        kind = "write" if cue.group("write") else "read"
        if kind == "write" and cue.group("write") == "set" and _BE_BEFORE.search(text[sentence_start : cue.start()]):
            kind = "read"
        if kind == "write" and _QUESTION_BEFORE.search(text[sentence_start : cue.start()]):
            kind = "read"  # "do you use wifi?"
        return kind, text[cue.start() : min(sentence_end, mention.end + 30)]
    if _PASSIVE_WRITE.search(text[mention.end : sentence_end]):
        return "write", window
    return "read", window


def _direction(window: str) -> str | None:
    window = _NOT_DIRECTION.sub(" ", window)
    on, off = bool(_ON.search(window)), bool(_OFF.search(window))
    return "on" if on and not off else "off" if off and not on else None


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
        scenario = getattr(task, "user_scenario", None)
        instructions = getattr(scenario, "instructions", None)
        if isinstance(instructions, str):
            self.reason, self.known, self.rules = instructions, "", instructions
        else:
            self.reason = str(getattr(instructions, "reason_for_call", "") or "")
            self.known = str(getattr(instructions, "known_info", "") or "")
            self.rules = str(getattr(instructions, "task_instructions", "") or "")
        criteria = getattr(task, "evaluation_criteria", None)
        actions = list(getattr(criteria, "actions", None) or [])
        self.expected = [
            (str(a.name), dict(a.arguments or {}), a.compare_args) for a in actions if getattr(a, "requestor", "assistant") == "user"
        ]
        self.max_tool_steps = int(max_tool_steps)
        self.stats = stats if stats is not None else CustomerStats()
        known = _sentences(self.known)
        self.identity = [s for s in known if re.search(r"\d{3}-\d{3}-\d{4}|\bYou are [A-Z]", s)]
        self.location = [s for s in known if re.search(r"\babroad\b|\bat home\b|\bcurrently in\b|\blocated\b", s)]
        reason, rules = self.reason.lower(), self.rules.lower()  # the reason first: the rules cite other tools as examples
        self.goal = next(((tool, check) for scope in (reason, rules) for key, tool, check in _GOALS if key in scope), None)
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
        for kind, feature, window in self._intents(text):
            if turn.full():
                break
            if kind == "write":
                parts.append(turn.write(feature, text, window))
            else:
                parts.append(turn.read(feature, text))
        parts = [p for p in parts if p]
        stop = None
        goal_reading = turn.goal_reading()
        if self.goal and goal_reading is None and _FIX_CLAIM.search(text) and not turn.full():
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

    def _intents(self, text: str) -> list[tuple[str, _Feature, str]]:
        cues = list(_CUES.finditer(text))
        bounds = [m.end() for m in _SENTENCE_END.finditer(text)]
        order: list[str] = []
        chosen: dict[str, tuple[str, _Feature, str]] = {}
        for mention in _mentions(text):
            feature = mention.feature
            if feature.write is None and feature.read is None:
                continue
            kind, window = _mode(text, mention, cues, bounds)
            if kind is None:
                continue
            if kind == "write" and feature.write is None:
                continue  # "change the type of cellular network...": not a question about it
            if kind == "read" and feature.read is None:
                continue
            if feature.name not in chosen:
                order.append(feature.name)
                chosen[feature.name] = (kind, feature, window)
            elif kind == "write" and chosen[feature.name][0] == "read":
                chosen[feature.name] = (kind, feature, window)
        return [chosen[name] for name in order]


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

    def read(self, feature: _Feature, text: str) -> str:
        if feature.read in ("check_app_permissions", "check_app_status"):
            app = self._app(text)
            return self.read_tool(feature.read, {"app_name": app}) if app else prompts.ASK_APP
        return self.read_tool(feature.read, {})

    def _app(self, text: str) -> str | None:
        named = [app for app, pattern in _APPS if pattern.search(text)]
        if named:
            return named[0]
        pending = [a[1].get("app_name") for a in self.customer.pending() if a[0] == "grant_app_permission"]
        return pending[0] if pending and isinstance(pending[0], str) else ("messaging" if "mms" in text else None)

    def report(self, name: str, arguments: dict) -> str:
        result = self.call(name, arguments)
        return (prompts.FAILED if result.error else prompts.DONE).format(output=_clip(result.content))

    def write(self, feature: _Feature, text: str, window: str) -> str:
        pending = self.customer.pending()
        tool = feature.write
        if tool == "set_network_mode_preference":
            return self._network_mode(text, pending)
        if tool == "grant_app_permission":
            return self._grant(text, pending)
        if tool == "apn":
            if _RESET_WORDS.search(window) or _RESET_WORDS.search(text):
                return self.report("reset_apn_settings", {})
            chosen = [a for a in pending if a[0] == "set_apn_settings"]
            return self.report("set_apn_settings", chosen[0][1]) if chosen else prompts.ASK_APN
        if tool == "vpn":
            direction = _direction(window)
            if direction is None:
                chosen = [a[0] for a in pending if a[0] in ("connect_vpn", "disconnect_vpn")]
                if not chosen:
                    return self.read_tool("check_vpn_status", {})
                return self.report(chosen[0], {})
            return self.report("connect_vpn" if direction == "on" else "disconnect_vpn", {})
        if tool in _TOGGLE_STATE:
            direction = None if re.search(r"\btoggl\w*", window) else _direction(window)
            if direction is not None:
                if self.calls + 2 > self.customer.max_tool_steps:
                    return ""  # no room to look before switching: the intent is dropped, like the ones after a full turn
                read_tool, pattern = _TOGGLE_STATE[tool]
                state = self.call(read_tool, {})
                found = pattern.search(state.content.lower()) if not state.error else None
                if found:
                    current = "on" if found.group(1) in ("on", "yes") else "off"
                    if current == direction:
                        return prompts.ALREADY.format(state=current)
        return self.report(tool, {})

    def _network_mode(self, text: str, pending: list) -> str:
        named = [mode for mode, pattern in _MODES if pattern.search(text)]
        expected = [a[1].get("mode") for a in pending if a[0] == "set_network_mode_preference"]
        if len(named) == 1:
            mode = named[0]
        elif expected and (not named or expected[0] in named):
            mode = expected[0]
        else:
            return prompts.ASK_MODE
        return self.report("set_network_mode_preference", {"mode": mode})

    def _grant(self, text: str, pending: list) -> str:
        named = [perm for perm, pattern in _PERMISSIONS if pattern.search(text)]
        grants = [a for a in pending if a[0] == "grant_app_permission"]
        chosen = [a[1] for a in grants if a[1].get("permission") in named] or ([a[1] for a in grants] if not named else [])
        if not chosen:
            given = [args for name, args in self.customer.performed if name == "grant_app_permission" and args.get("permission") in named]
            if given:
                return prompts.ALREADY_GRANTED.format(app=given[0].get("app_name"), permission=given[0].get("permission"))
            app = next((app for app, pattern in _APPS if pattern.search(text)), None)
            if app is None or len(named) != 1:
                return prompts.ASK_PERMISSION
            chosen = [{"app_name": app, "permission": named[0]}]
        reports = []
        for arguments in chosen:
            if self.full():
                break
            reports.append(self.report("grant_app_permission", dict(arguments)))
        return " ".join(reports)
