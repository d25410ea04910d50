"""The simulated customer of tau2 telecom in dual control: the person holding the phone.

The environment (:mod:`arew.envs.tau2.env`) hands each agent message to ``customer.reply(message,
device)`` and shows the agent the returned :class:`CustomerTurn`. The customer operates the
phone through ``device`` (:class:`Device`: the 30 device tools of tau2's ``TelecomUserTools``,
run on the episode's environment as requestor "user" and recorded in the trajectory); what
the phone shows stays hidden from the agent unless the customer says it. A turn carries the
customer's words with any stop token removed, the stop token itself (``###STOP###``,
``###TRANSFER###``, ``###OUT-OF-SCOPE###`` or None, as tau2's user simulator ends a call), and
where it came from (``source``: "llm", "offline" or "fallback"). ``reply`` never raises.

Two customers (option ``customer``):

- :class:`LLMCustomer` (``"llm"``) behaves as tau2's user simulator: a system prompt with the
  simulation rules and ``task.user_scenario`` (:mod:`arew.envs.tau2.customer_prompts`), the
  conversation from the customer's side (the agent's messages are ``user`` turns, its own
  ``assistant`` turns), the device tools as OpenAI ``tools`` with ``tool_choice="auto"``,
  temperature 0. Per reply: POST; while the reply makes tool calls, each runs on
  ``device.call`` (a call with malformed arguments or an unknown name is answered with an
  error result instead, and the model may correct itself), the assistant ``tool_calls``
  message and the ``tool`` results join the conversation, and it POSTs again, up to
  ``customer_max_tool_steps`` device calls per reply; a text reply ends the turn, its stop
  token detected anywhere in the text (the earliest one if several) and stripped. Requests
  go through :class:`arew.envs.users.client.ChatCompletionClient` (the process's semaphore per
  endpoint, timeout per attempt, retries, circuit breaker, body cap). Any failure (no
  reply, a malformed body, an empty text, a tool call returned as plain text, a text that the
  length cap ``customer_max_tokens`` cut while it was repeating itself (a run of
  :data:`LOOP_WORDS` words :data:`LOOP_REPEATS` times or more: small models loop until the
  cap, and the loop is no message), the tool-step bound reached) makes that turn the
  offline customer's (``customer_fallback="offline"``, ``source="fallback"``) or a request
  to repeat (``"repeat"``); device calls already made in the turn stay made and are not
  repeated. Fallbacks are counted and logged (the first of the process, then each time the
  process count reaches a power of two).
- :class:`OfflineCustomer` (``"offline"``): deterministic rules, no network (below).

Counters: :class:`CustomerStats` in ``customer.stats`` (per customer, i.e. per episode) and
:data:`PROCESS_STATS` (the process); the names of :class:`arew.envs.users.base.UserStats` plus
``tool_calls``, ``tool_errors`` and ``tool_step_limits``, so the customer has a class of its
own rather than adding to the MediQ/FloDial user's process counters. ``as_dict(prefix)`` as
there.

**The offline customer**, in order, for each agent message (lower-cased; "Wi-Fi", "flight
mode", "re-seat"... normalised; the first 4000 characters read):

1. Its first reply starts with the scenario's reason for the call, in the first person.
2. A transfer to a human or another agent ("transfer" and "agent", "human", "specialist"...)
   ends the call with ``###TRANSFER###``.
3. A question about identity (phone number, name, account, verify your identity...) is
   answered with the known-info sentences that name the customer or a phone number; a
   question about location (abroad, travelling, country...) with those that say where the
   customer is; "how can I help / what is the problem" repeats the reason for the call. An
   offer to refuel data is accepted with the amount the scenario's instructions allow, a
   change of plan declined when they say so.
4. Phone features are found in the message by keyword patterns (airplane mode, mobile data,
   roaming, data saver, Wi-Fi, Wi-Fi calling, network mode, APN, VPN, SIM, reboot, app
   permissions, MMS, speed test, status bar, network status, installed apps, payment).
   Each mention is an action or a question by the nearest verb before it in its sentence
   (toggle, turn, switch, enable, reset, restart, reseat, grant, set, change, pay, make,
   use... are actions; check, look, what, is, does, try, run... are questions; a "set"
   right after is/are is a question; "don't", "do not", "no need to" just before the verb
   cancel the mention; with no verb before it, "needs to be turned..." after it is an
   action, anything else a question). Features are taken in the order of their first
   mention, one intent per feature (an action if any mention is one).
5. An action runs the feature's write tool via ``device.call`` and is reported in one
   sentence with the tool's output ("Okay, I did that. My phone says: ..."). Arguments:
   for the network mode, the one mode the message names (4G/5G preferred, 4G only, 3G
   only, 2G only), else the pending expected user-side action's mode (also when the
   message names several, the expected one among them), else it asks which; for app
   permissions, every pending expected ``grant_app_permission`` whose permission the
   message names (or all pending ones, when it names none), else the app and permission
   the message names, else it asks; for the APN, ``reset_apn_settings`` when the message
   says reset/default/restore, else it asks; a VPN goes by connect/disconnect (on/off).
   An explicit direction ("turn airplane mode off") is checked first with the feature's
   read tool, and nothing is toggled when the phone is already so ("I looked, and it is
   already off."); "toggle", or both "on" and "off", toggles without looking.
6. A question runs the feature's read tool (e.g. ``check_status_bar``, ``can_send_mms``,
   ``run_speed_test``, ``check_network_status``) and relays its output; each (tool,
   arguments) at most once per reply.
7. The goal is the scenario's success reading: ``can_send_mms`` says it can send (MMS
   tasks), ``run_speed_test`` says Excellent (mobile data), the status bar shows signal
   (no service). When the agent says the issue is fixed or asks to try again and the
   goal reading was not taken in this reply, the customer takes it. A goal reading that
   succeeds ends the call with ``###STOP###``; one that fails says it is still not fixed.
8. A goodbye ("goodbye", "bye", "have a great day", "take care") ends the call with
   ``###STOP###``; so does "anything else?" after the goal was reached.
9. Otherwise: "Sorry, I'm not sure what you mean. What should I do on my phone?".

At most ``max_tool_steps`` device calls per reply (default 8); intents beyond are dropped.
It is deterministic in (task, conversation, device outputs) and never raises.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

from arew.envs.options import Option
from arew.envs.tau2 import customer_prompts as prompts
from arew.envs.users.base import UserStats
from arew.envs.users.base import count as add_count
from arew.envs.users.client import ChatCompletionClient, ClientConfig, RequestFailed

logger = logging.getLogger(__name__)

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)
CUSTOMER_KINDS = ("offline", "llm")
FALLBACKS = ("offline", "repeat")
MAX_MESSAGE_CHARS = 4000
MAX_OUTPUT_CHARS = 400


# ---- the interface ------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceResult:
    content: str
    error: bool


class Device(Protocol):
    user_tools: list[dict]  # OpenAI tool schemas of the device (user-side) tools

    def call(self, name: str, arguments: dict) -> DeviceResult: ...


@dataclass(frozen=True)
class CustomerTurn:
    text: str  # the customer's message to the agent, stop token removed
    stop: str | None  # one of STOP_TOKENS or None
    source: str  # "llm", "offline" or "fallback"
    error: str | None = None  # why a fallback happened


class Customer(Protocol):
    async def reply(self, agent_message: str, device: Device) -> CustomerTurn: ...


@dataclass
class CustomerStats(UserStats):
    """A simulated user's counts (:class:`arew.envs.users.base.UserStats`) and the customer's phone use:
    ``tool_calls``: device calls made; ``tool_errors``: calls that failed (the device's error,
    malformed arguments, unknown tool); ``tool_step_limits``: LLM replies cut off by
    ``max_tool_steps``. Kept apart from the MediQ/FloDial users' process counts."""

    tool_calls: int = 0
    tool_errors: int = 0
    tool_step_limits: int = 0


PROCESS_STATS = CustomerStats()


def count(stats: CustomerStats, name: str, n: int = 1) -> None:
    """Add ``n`` to counter ``name`` of ``stats`` and of this module's :data:`PROCESS_STATS`."""
    add_count(stats, name, n, process=PROCESS_STATS)


def split_stop(text: Any) -> tuple[str, str | None]:
    """(the text without stop tokens, the earliest stop token in it or None)."""
    text = text if isinstance(text, str) else ""
    found = [(text.find(token), token) for token in STOP_TOKENS if token in text]
    stop = min(found)[1] if found else None
    for token in STOP_TOKENS:
        text = text.replace(token, " ")
    return " ".join(text.split()) if stop else text.strip(), stop


def _safe_call(device: Any, name: str, arguments: dict) -> DeviceResult:
    try:
        result = device.call(name, dict(arguments))
        content = getattr(result, "content", "")
        return DeviceResult("" if content is None else str(content), bool(getattr(result, "error", False)))
    except Exception as exc:  # a device must not crash the customer
        return DeviceResult(f"Error: {type(exc).__name__}: {exc}"[:MAX_OUTPUT_CHARS], True)


def _tool_names(device: Any) -> frozenset[str]:
    names = set()
    for schema in getattr(device, "user_tools", None) or []:
        function = schema.get("function") if isinstance(schema, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


# ---- the offline customer ---------------------------------------------------------------------
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
_WRITE_ONLY_CUES = re.compile(rf"\b(?:{_WRITE_CUE})\b")
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

    # -- bookkeeping ----------------------------------------------------------------------------
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

    # -- replying -------------------------------------------------------------------------------
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
        result = _safe_call(self.device, name, arguments)
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


# ---- the LLM customer -------------------------------------------------------------------------
@dataclass(frozen=True)
class LLMCustomerConfig(ClientConfig):
    """The client settings (as ``customer_*`` options) with the customer's defaults, and how it samples and falls back."""

    OPTION_PREFIX = "customer_"

    url: str = "http://127.0.0.1:8000/v1"
    model: str = "Qwen/Qwen2.5-14B-Instruct"
    timeout: float = 60.0
    max_retries: int = 2
    temperature: float = 0.0
    max_tokens: int = 256
    max_tool_steps: int = 8
    fallback: str = "offline"

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise ValueError(f"customer_fallback: must be one of {FALLBACKS}, got {self.fallback!r}")
        super().__post_init__()
        self.check_numbers(floats={"temperature": False}, integers={"max_tokens": 1, "max_tool_steps": 1})


LOOP_WORDS = 6
LOOP_REPEATS = 3


def repeated_run(text: Any, words: int = LOOP_WORDS) -> int:
    """How often the most frequent run of ``words`` consecutive words occurs in ``text`` (case and
    punctuation aside; 0 when the text is shorter)."""
    tokens = re.findall(r"[\w']+", text.lower()[:MAX_MESSAGE_CHARS * 4]) if isinstance(text, str) else []
    runs: dict[tuple[str, ...], int] = {}
    for i in range(len(tokens) - words + 1):
        run = tuple(tokens[i : i + words])
        runs[run] = runs.get(run, 0) + 1
    return max(runs.values(), default=0)


_TEXT_TOOL_CALL = re.compile(r"<tool_call>|</tool_call>|<\|python_tag\|>|\"name\"\s*:\s*\"\w+\"\s*,\s*\"(?:arguments|parameters)\"")


class LLMCustomer:
    """The customer as an LLM behind an OpenAI-compatible server with tool calling (module docstring)."""

    def __init__(self, task: Any, config: LLMCustomerConfig | None = None, offline: OfflineCustomer | None = None):
        self.config = config or LLMCustomerConfig()
        self.stats = CustomerStats()
        self.offline = offline or OfflineCustomer(task, self.config.max_tool_steps, stats=self.stats)
        self.client = ChatCompletionClient(self.config, counters=(self.stats, PROCESS_STATS))
        scenario = getattr(task, "user_scenario", "")
        self.history: list[dict[str, Any]] = [{"role": "system", "content": prompts.system_prompt(scenario)}]

    async def reply(self, agent_message: str, device: Device) -> CustomerTurn:
        count(self.stats, "calls")
        message = agent_message if isinstance(agent_message, str) else str(agent_message)
        self.history.append({"role": "user", "content": message})
        tools = [t for t in (getattr(device, "user_tools", None) or []) if isinstance(t, dict)]
        names = _tool_names(device)
        sampling: dict[str, Any] = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if tools:
            sampling.update(tools=tools, tool_choice="auto")
        made: list[tuple[str, dict, DeviceResult]] = []
        try:
            while True:
                answer = await self.client.complete(self.history, **sampling)
                if answer.tool_calls:
                    if len(made) + len(answer.tool_calls) > self.config.max_tool_steps:
                        count(self.stats, "tool_step_limits")
                        bound = f"customer_max_tool_steps={self.config.max_tool_steps}"
                        return self._fallback(message, device, made, f"the reply would exceed {bound} device calls")
                    self._run_calls(answer, device, names, made)
                    continue
                if _TEXT_TOOL_CALL.search(answer.text):
                    count(self.stats, "parse_failures")
                    hint = "serve it with --enable-auto-tool-choice --tool-call-parser (hermes for Qwen2.5)"
                    return self._fallback(message, device, made, f"the server returned a tool call as text; {hint}")
                repeats = repeated_run(answer.text) if answer.finish_reason == "length" else 0
                if repeats >= LOOP_REPEATS:
                    count(self.stats, "parse_failures")
                    loop = f"a run of {LOOP_WORDS} words {repeats} times"
                    bound = f"customer_max_tokens={self.config.max_tokens}"
                    return self._fallback(message, device, made, f"the reply repeats itself ({loop}) until {bound} cut it")
                text, stop = split_stop(answer.text)
                if not text and stop is None:
                    count(self.stats, "parse_failures")
                    return self._fallback(message, device, made, "the reply is empty")
                self.history.append({"role": "assistant", "content": answer.text.strip()})
                self.offline.observe(message, made)
                return CustomerTurn(text, stop, "llm")
        except RequestFailed as failure:
            return self._fallback(message, device, made, str(failure))

    def _run_calls(self, answer: Any, device: Any, names: frozenset[str], made: list) -> None:
        """Run one reply's tool calls; the assistant message and the results join the history."""
        self.history.append(
            {
                "role": "assistant",
                "content": answer.text or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        # what was asked, re-encoded: a malformed string sent back would make servers that
                        # re-parse the history (vLLM) reject every later request
                        "function": {"name": call.name or "invalid", "arguments": json.dumps(call.arguments or {})},
                    }
                    for call in answer.tool_calls
                ],
            }
        )
        for call in answer.tool_calls:
            if not call.ok:
                count(self.stats, "tool_errors")
                result = DeviceResult(f"Error: {call.error}; call the tool again with a JSON object of arguments", True)
            elif names and call.name not in names:
                count(self.stats, "tool_errors")
                result = DeviceResult(f"Error: the phone has no tool named {call.name[:64]!r}", True)
            else:
                count(self.stats, "tool_calls")
                result = _safe_call(device, call.name, call.arguments)
                if result.error:
                    count(self.stats, "tool_errors")
                made.append((call.name, dict(call.arguments), result))
            self.history.append({"role": "tool", "tool_call_id": call.id, "content": result.content})

    def _fallback(self, message: str, device: Any, made: list, reason: str) -> CustomerTurn:
        count(self.stats, "fallbacks")
        n = PROCESS_STATS.fallbacks
        if n & (n - 1) == 0:
            hint = ""
            if "HTTP 400" in reason:
                hint = " (with tools, an HTTP 400 from vLLM usually means it was started without --enable-auto-tool-choice --tool-call-parser)"
            logger.warning(
                "simulated customer at %s failed (%s)%s; using the %s reply (%d fallbacks in this process)",
                self.config.endpoint,
                reason,
                hint,
                self.config.fallback,
                n,
            )
        if self.config.fallback == "offline":
            turn = self.offline.respond(message, device, made)
        else:
            self.offline.observe(message, made)
            turn = CustomerTurn(prompts.REPEAT, None, "offline")
        content = f"{turn.text} {turn.stop}".strip() if turn.stop else turn.text
        self.history.append({"role": "assistant", "content": content})
        return CustomerTurn(turn.text, turn.stop, "fallback", reason)


# ---- options ---------------------------------------------------------------------------------
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
