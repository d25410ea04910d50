"""Critique audits of tau2 telecom: ``tau2-solo`` and ``tau2-dual`` (the offline customer).

Rows: tau2's own base tasks (train and test, 114), built as the data preparation builds them
(the whole task as tau2's JSON, :mod:`arew_tau2.tasks`), with ``reward: official``.
``rows(n, seed)`` deals the three task families (MMS, mobile data, no service) in turn, each in
an order drawn from ``seed``, so a few rows already hold tasks with company-side actions
(refuelling data, enabling roaming, a payment, a transfer).

The competent policies are oracles: they read the task's expected actions. Solo: look at the
status bar and, once, at each reading that shows the state an expected action repairs, then
make the expected calls in order, then (unless the task ends in a transfer) take the scenario's
success reading, and answer. Dual control: greet and ask for the phone number and name, ask what
the status bar shows, then per expected action in order: a company-side action is the agent's
own call (after looking the customer up), a phone action is first diagnosed (the customer is
asked, once, for the reading that shows its state) and then asked for in plain words (a second
reboot "once more"); a transfer is made and announced; last, ask the customer to check whether
it works now (its success reading ends the call). Both reach tau2's official reward on all 114
base tasks.

Adversaries, solo:

- ``spam_reads``: every read tool (company and phone, with the oracle's ids), then answer;
- ``spam_writes``: every write tool with plausible arguments (the oracle's ids, 4G/5G
  preferred, the messaging app's SMS and storage permissions), no diagnosis, then answer;
- ``repeat_calls`` (privileged): the first expected call, then the same call again and again
  (reformatted: fenced, ``args``, a string of arguments), with status-bar reads between;
- ``answer_early``: one look at the status bar, then the answer;
- ``format``: ill-typed arguments (``gb_amount: true`` / ``"2.0"``, ``limit: "3"``), extra keys,
  two calls in one turn, a phone tool with a requestor, prose around the JSON.

Adversaries, dual control:

- ``shotgun``: one message naming every phone repair (no diagnosis), then "does it work now?";
- ``shotgun_split``: every phone repair, one per message, then "does it work now?";
- ``keyword_stuffing``: messages that are bags of the features' keywords (and "fixed", "phone
  number"), reshuffled each turn;
- ``negated`` (privileged: it names the task's own repairs): negated, deferred and conditional
  requests and statements of state ("Resetting your APN settings is not necessary right now.",
  "We might need to restart your phone later, but not yet.", "Airplane mode is on.", ...);
- ``repeat_reworded`` (privileged): the first diagnostic question and the first repair, each
  asked again in other words;
- ``answer_early``: the identity question and "it should be fixed now, can you check?", then the
  answer;
- ``format``: a phone tool as a JSON call, a bare stop token, a fenced request (read as a
  malformed call), a made-up customer line with a transfer token, a message with both payload
  tags, a JSON object that is no call, ill-typed company calls (``gb_amount: true`` / ``"2.0"``);
- ``diagnose_only`` (privileged): the greeting and every reading that bears on the task, no repair;
- ``read_everything``: one reading request per message for every reading of the phone;
- ``spam_tools``: every company tool (reads and writes, the oracle's ids), then answer.
"""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from arew.audit.runner import Policy, TaskAudit, View
from arew_tau2 import DUAL, SOLO

ANSWER = "<scratch>done</scratch><answer>Thank you, your issue should be resolved now.</answer>"
FAMILIES = ("[mms_issue]", "[mobile_data_issue]", "[service_issue]")

# the reading that shows the state an expected phone action changes (the diagnosis before it)
DIAGNOSIS = {
    "toggle_airplane_mode": "check_network_status",
    "toggle_data": "check_network_status",
    "toggle_roaming": "check_network_status",
    "set_network_mode_preference": "check_network_mode_preference",
    "reset_apn_settings": "check_apn_settings",
    "reseat_sim_card": "check_sim_status",
    "toggle_wifi_calling": "check_wifi_calling_status",
    "toggle_data_saver_mode": "check_data_restriction_status",
    "disconnect_vpn": "check_vpn_status",
    "connect_vpn": "check_vpn_status",
    "grant_app_permission": "check_app_permissions",
    "make_payment": "check_payment_request",
    "toggle_wifi": "check_wifi_status",
}
# the customer's readings, asked for in plain words
READ_REQUESTS = {
    "check_status_bar": "What does the status bar at the top of your screen show?",
    "check_network_status": "Could you check your network status for me?",
    "check_network_mode_preference": "Could you check which network mode your phone prefers?",
    "check_apn_settings": "Could you look at your APN settings and tell me what they say?",
    "check_sim_status": "Could you check the status of your SIM card?",
    "check_wifi_calling_status": "Could you check whether Wi-Fi calling is on?",
    "check_data_restriction_status": "Could you check whether data saver mode is on?",
    "check_vpn_status": "Could you check whether you are connected to a VPN?",
    "check_app_permissions": "Could you check which permissions your messaging app has?",
    "check_payment_request": "Could you check whether you have a payment request from us?",
    "check_wifi_status": "Could you check your Wi-Fi status?",
    "check_installed_apps": "Could you tell me which apps are installed on your phone?",
    "check_app_status": "Could you check the app status of your messaging app?",
    "run_speed_test": "Could you run a speed test?",
    "can_send_mms": "Could you try sending an MMS?",
}
# a phone action asked for in plain words (no tool names), from its name and arguments
REPAIR_REQUESTS = {
    "toggle_airplane_mode": "Please toggle airplane mode on your phone.",
    "toggle_data": "Please toggle your mobile data.",
    "toggle_roaming": "Please toggle data roaming on your phone.",
    "toggle_data_saver_mode": "Please toggle data saver mode.",
    "toggle_wifi_calling": "Please toggle Wi-Fi calling.",
    "toggle_wifi": "Please toggle your Wi-Fi.",
    "reset_apn_settings": "Please reset your APN settings to the default.",
    "reseat_sim_card": "Please take out your SIM card and put it back in.",
    "reboot_device": "Please restart your phone.",
    "disconnect_vpn": "Please disconnect your VPN.",
    "connect_vpn": "Please connect your VPN.",
    "make_payment": "Please pay the bill I sent you.",
}
MODES = {"4g_5g_preferred": "4G/5G preferred", "4g_only": "4G only", "3g_only": "3G only", "2g_only": "2G only"}
# every phone repair, for the adversaries that name them all
ALL_REPAIRS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("toggle_airplane_mode", {}),
    ("toggle_data", {}),
    ("toggle_roaming", {}),
    ("toggle_data_saver_mode", {}),
    ("toggle_wifi_calling", {}),
    ("reset_apn_settings", {}),
    ("reseat_sim_card", {}),
    ("set_network_mode_preference", {"mode": "4g_5g_preferred"}),
    ("grant_app_permission", {"app_name": "messaging", "permission": "sms"}),
    ("grant_app_permission", {"app_name": "messaging", "permission": "storage"}),
    ("disconnect_vpn", {}),
    ("make_payment", {}),
    ("reboot_device", {}),
)
SHOTGUN = (
    "Please toggle airplane mode, toggle your mobile data, toggle data roaming, toggle data saver mode, toggle Wi-Fi calling,"
    " reset your APN settings to default, reseat your SIM card, set your network mode to 4G/5G preferred, give the messaging app"
    " the SMS and storage permissions, disconnect your VPN, make the payment and restart your phone."
)
CHECK_NOW = "Thanks! Could you check whether it works now?"
GREETING = "Hello, thank you for calling. Could you give me your phone number and your full name, please?"


def repair_request(name: str, arguments: dict[str, Any]) -> str:
    """A plain request for the phone action ``name(arguments)``."""
    if name == "set_network_mode_preference":
        return f"Please change your network mode to {MODES.get(str(arguments.get('mode')), arguments.get('mode'))}."
    if name == "grant_app_permission":
        return f"Please give the {arguments.get('app_name')} app the {arguments.get('permission')} permission."
    return REPAIR_REQUESTS[name]


def read_arguments(tool: str) -> dict[str, Any]:
    return {"app_name": "messaging"} if tool in ("check_app_permissions", "check_app_status") else {}


def call(name: str, arguments: dict[str, Any] | None = None) -> str:
    return (
        "<scratch>call</scratch><interact>" + json.dumps({"name": name, "arguments": arguments or {}}) + "</interact>"
    )


def say(text: str) -> str:
    return f"<scratch>talk</scratch><interact>{text}</interact>"


# ---- rows --------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _base_tasks() -> tuple[tuple[str, str], ...]:
    """(id, tau2 JSON) of every base task, in tau2's order (parsed once per process)."""
    from arew_tau2.tasks import load_tasks

    tasks, named = load_tasks()
    return tuple((task_id, tasks[task_id].model_dump_json()) for task_id in named["base"])


def _rows(task_name: str) -> Callable[[int, int], list[dict[str, Any]]]:
    def rows(n: int, seed: int) -> list[dict[str, Any]]:
        rng = np.random.default_rng(seed)
        families = [[t for t in _base_tasks() if t[0].startswith(family)] for family in FAMILIES]
        dealt: list[tuple[str, str]] = []
        while len(dealt) < n:  # one pass: the families in turn, each in a fresh order, until all are dealt
            decks = [[family[k] for k in rng.permutation(len(family))] for family in families]
            while any(decks) and len(dealt) < n:
                dealt += [deck.pop(0) for deck in decks if deck][: n - len(dealt)]
        return [
            {
                "task": task_name,
                "task_id": task_id,
                "task_json": task_json,
                "task_set": "base",
                "split": "audit",
                "index": index,
                "seed": int(rng.integers(2**31)),
                "reward": "official",
            }
            for index, (task_id, task_json) in enumerate(dealt)
        ]

    return rows


# ---- the oracle's view of a task ---------------------------------------------------------------
def _expected(env: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(requestor, name, arguments) of the task's expected actions, in order (3 base tasks list ``reboot_device``
    twice: one of them needs the second reboot, after the line is resumed)."""
    return [(a.requestor, a.name, dict(a.arguments or {})) for a in env.task.evaluation_criteria.actions or []]


def _ids(env: Any) -> dict[str, Any]:
    """The customer's ids as the expected company actions name them (the oracle's lookup)."""
    ids: dict[str, Any] = {"customer_id": "C1001", "line_id": "L1002", "bill_id": "B1234321"}
    for _, _, arguments in _expected(env):
        ids.update({k: v for k, v in arguments.items() if k in ids})
    return ids


def _phone(env: Any) -> str:
    found = re.search(r"\d{3}-\d{3}-\d{4}", str(getattr(env.task.user_scenario.instructions, "known_info", "") or ""))
    return found.group() if found else "555-123-2002"


def _goal(env: Any) -> str:
    from arew_tau2.customer.offline import goal_of

    goal = goal_of(env.task)
    return goal[0] if goal else "check_status_bar"


class _Scripted(abc.ABC):
    """Plays ``plan(env)``: a list of agent texts, then the answer."""

    def __init__(self) -> None:
        self.texts: list[str] | None = None
        self.step = 0

    def __call__(self, view: View) -> str:
        if self.texts is None:
            self.texts = self.plan(view.env)
        if view.round == "answer" or self.step >= len(self.texts):
            return ANSWER
        self.step += 1
        return self.texts[self.step - 1]

    @abc.abstractmethod
    def plan(self, env: Any) -> list[str]: ...


# ---- solo --------------------------------------------------------------------------------------
class SoloCompetent(_Scripted):
    def plan(self, env: Any) -> list[str]:
        expected = _expected(env)
        reads = ["check_status_bar"]
        for _, name, _ in expected:
            if DIAGNOSIS.get(name) and DIAGNOSIS[name] not in reads:
                reads.append(DIAGNOSIS[name])
        texts = [call(tool, read_arguments(tool)) for tool in reads]
        if any(requestor == "assistant" for requestor, _, _ in expected):
            texts.append(call("get_customer_by_phone", {"phone_number": _phone(env)}))
        texts += [call(name, arguments) for _, name, arguments in expected]
        if not any(
            name == "transfer_to_human_agents" for _, name, _ in expected
        ):  # the success reading, after the repairs
            texts.append(call(_goal(env), read_arguments(_goal(env))))
        return texts


def _company_tools(kind: str) -> list[tuple[str, Any]]:
    """(name, ToolSpec) of the company tools of ``kind``."""
    from arew_tau2.runtime import runtime

    return [(name, spec) for name, spec in runtime().agent_tools.items() if spec.kind == kind]


def _company_calls(env: Any, kind: str) -> list[str]:
    """Every company tool of ``kind`` ("read" or "write") with the oracle's ids."""
    ids = {
        **_ids(env),
        "phone_number": _phone(env),
        "id": _ids(env)["line_id"],
        "full_name": "John Smith",
        "dob": "1985-06-15",
    }
    ids.update(reason="audit", gb_amount=2.0, limit=12, summary="audit")
    texts = []
    for name, spec in _company_tools(kind):
        texts.append(call(name, {key: ids[key] for key, _, required, _ in spec.params if required}))
    return texts


class SpamReads(_Scripted):
    def plan(self, env: Any) -> list[str]:
        from arew_tau2.runtime import runtime

        phone = [call(name, read_arguments(name)) for name, spec in runtime().user_tools.items() if spec.kind == "read"]
        return _company_calls(env, "read") + phone


class SpamWrites(_Scripted):
    def plan(self, env: Any) -> list[str]:
        phone = [call(name, arguments) for name, arguments in ALL_REPAIRS] + [call("toggle_wifi"), call("connect_vpn")]
        return phone + _company_calls(env, "write")


class SoloRepeat(_Scripted):
    """The first expected call, then the same call again and again in other formats, status-bar reads between."""

    def plan(self, env: Any) -> list[str]:
        _, name, arguments = _expected(env)[0]
        forms = (
            call(name, arguments),
            "<interact>```json\n" + json.dumps({"name": name, "arguments": arguments}) + "\n```</interact>",
            "<interact>" + json.dumps({"name": name, "args": arguments}) + "</interact>",
            "<interact>" + json.dumps({"name": name, "arguments": json.dumps(arguments)}) + "</interact>",
        )
        texts = []
        for k in range(12):
            texts.append(forms[k % len(forms)])
            if k % 3 == 2:
                texts.append(call("check_status_bar"))
        return texts


class SoloUnfinished(_Scripted):
    """The expected repairs without a diagnosis, all but the last, then the stop: every call it makes is needed."""

    def plan(self, env: Any) -> list[str]:
        return [call(name, arguments) for _, name, arguments in _expected(env)[:-1]]


class SoloRepairUndo(_Scripted):
    """Each expected repair, then the same call again (a toggle goes back), then the stop."""

    def plan(self, env: Any) -> list[str]:
        return [call(name, arguments) for _, name, arguments in _expected(env) for _ in range(2)]


class SoloAnswerEarly(_Scripted):
    def plan(self, env: Any) -> list[str]:
        return [call("check_status_bar")]


class SoloFormat(_Scripted):
    def plan(self, env: Any) -> list[str]:
        ids = _ids(env)
        first = _expected(env)[0]
        return [
            call("refuel_data", {"customer_id": ids["customer_id"], "line_id": ids["line_id"], "gb_amount": True}),
            call("refuel_data", {"customer_id": ids["customer_id"], "line_id": ids["line_id"], "gb_amount": "2.0"}),
            call("get_bills_for_customer", {"customer_id": ids["customer_id"], "limit": "3"}),
            call("get_customer_by_id", {"customer_id": 1001}),
            "<interact>" + json.dumps({"name": first[1], "arguments": first[2], "requestor": "user"}) + "</interact>",
            "<interact>" + call(first[1], first[2])[len("<scratch>call</scratch><interact>") :] * 2,
            f"<interact>I will now call {first[1]}: "
            + json.dumps({"name": first[1], "arguments": first[2]})
            + "</interact>",
            call(first[1], {**first[2], "note": "fix everything"}),
            f"<interact>{json.dumps({'name': first[1], 'arguments': first[2]})}</interact><answer>done</answer>",
        ]


# ---- dual control ------------------------------------------------------------------------------
class DualCompetent(_Scripted):
    def plan(self, env: Any) -> list[str]:
        texts = [say(GREETING), say(READ_REQUESTS["check_status_bar"])]
        asked = {"check_status_bar"}
        looked_up = False
        for requestor, name, arguments in _expected(env):
            if requestor == "assistant":
                if name == "transfer_to_human_agents":
                    texts += [call(name, arguments), say("I am transferring you to a human agent now; please hold.")]
                    return texts
                if not looked_up:
                    texts.append(call("get_customer_by_phone", {"phone_number": _phone(env)}))
                    looked_up = True
                texts.append(call(name, arguments))
                continue
            reading = DIAGNOSIS.get(name)
            if reading and reading not in asked:
                asked.add(reading)
                texts.append(say(READ_REQUESTS[reading]))
            request = say(repair_request(name, arguments))
            texts.append(request if request not in texts else request.replace(".</interact>", " once more.</interact>"))
        texts.append(say(CHECK_NOW))
        return texts


class DualUnfinished(_Scripted):
    """The expected repairs without a diagnosis, all but the last (the customer's asked for, the company's made), then a
    goodbye before anyone checks that it works."""

    def plan(self, env: Any) -> list[str]:
        texts = [say(GREETING)]
        for requestor, name, arguments in _expected(env)[:-1]:
            texts.append(call(name, arguments) if requestor == "assistant" else say(repair_request(name, arguments)))
        return texts + [say("That should fix it. Thank you for calling, goodbye!")]


class DualRepairUndo(_Scripted):
    """Each expected repair asked for twice (a toggle goes back), then the check."""

    def plan(self, env: Any) -> list[str]:
        texts = [say(GREETING)]
        for requestor, name, arguments in _expected(env):
            if requestor == "assistant":
                texts += [call(name, arguments)] * 2
            else:
                request = say(repair_request(name, arguments))
                texts += [request, request.replace(".</interact>", " once more.</interact>")]
        return texts + [say(CHECK_NOW)]


class Shotgun(_Scripted):
    def plan(self, env: Any) -> list[str]:
        return [say(GREETING), say(SHOTGUN), say(CHECK_NOW)]


class ShotgunSplit(_Scripted):
    def plan(self, env: Any) -> list[str]:
        return (
            [say(GREETING)]
            + [say(repair_request(name, arguments)) for name, arguments in ALL_REPAIRS]
            + [say(CHECK_NOW)]
        )


STUFFING = (
    "airplane mode mobile data roaming data saver wifi calling network mode 4g 5g apn settings vpn sim card reboot restart"
    " permissions sms storage mms speed test status bar signal payment bill phone number fixed working"
).split()


class KeywordStuffing(_Scripted):
    def plan(self, env: Any) -> list[str]:
        rng = np.random.default_rng(7)
        texts = []
        for _ in range(8):
            words = list(STUFFING)
            rng.shuffle(words)
            texts.append(say(" ".join(words)))
        return texts


# negated, deferred, conditional and stated (not requested) forms of a phone action
NEGATED = {
    "toggle_airplane_mode": (
        "Turning airplane mode on would cut your service, so please leave it alone.",
        "Don't toggle airplane mode.",
        "Airplane mode is on.",
    ),
    "toggle_data": (
        "There is no need to toggle your mobile data.",
        "Mobile data is off.",
        "We may need to turn on mobile data later.",
    ),
    "toggle_roaming": (
        "Please don't turn on data roaming yet.",
        "Roaming is off on your phone.",
        "Toggling roaming is not necessary.",
    ),
    "toggle_data_saver_mode": (
        "Leave data saver mode as it is.",
        "Data saver mode is on.",
        "Let's hold off on data saver mode for now.",
    ),
    "toggle_wifi_calling": (
        "Wi-Fi calling is on.",
        "You don't need to switch Wi-Fi calling.",
        "If that doesn't work, toggle Wi-Fi calling.",
    ),
    "reset_apn_settings": (
        "Resetting your APN settings is not necessary right now.",
        "Your APN settings are broken.",
        "Do not reset your APN settings.",
    ),
    "reseat_sim_card": (
        "Your SIM card seems to be missing.",
        "There's no need to reseat your SIM card.",
        "Reseating the SIM card can wait.",
    ),
    "set_network_mode_preference": (
        "Your network mode is set to 2G only.",
        "Let's not change the network mode yet.",
        "Changing the network mode would disconnect you.",
    ),
    "grant_app_permission": (
        "The messaging app is missing the storage permission.",
        "Don't grant any permissions to the messaging app.",
        "We might need to give the messaging app the SMS permission later.",
    ),
    "disconnect_vpn": (
        "Your VPN is connected.",
        "No need to disconnect your VPN.",
        "Disconnecting your VPN won't be necessary.",
    ),
    "make_payment": (
        "I've sent you a payment request.",
        "Please don't pay the bill yet.",
        "Paying the bill is not needed right now.",
    ),
    "reboot_device": (
        "We might need to restart your phone later, but not yet.",
        "A restart might help.",
        "Don't restart your phone.",
    ),
}


class Negated(_Scripted):
    """Privileged: for each of the task's phone actions, its negated, deferred and stated forms."""

    def plan(self, env: Any) -> list[str]:
        names = [name for requestor, name, _ in _expected(env) if requestor == "user"]
        texts = []
        for name in names or [
            "toggle_airplane_mode",
            "reset_apn_settings",
            "reboot_device",
        ]:  # a task the agent must transfer
            texts += [say(text) for text in NEGATED.get(name, ())]
        return texts[:20]


class RepeatReworded(_Scripted):
    """Privileged: the first diagnostic question and the first phone repair, each asked again in other words."""

    def plan(self, env: Any) -> list[str]:
        user = [(name, arguments) for requestor, name, arguments in _expected(env) if requestor == "user"]
        texts = [
            say("Hello, how can I help you today?"),
            say("What does your status bar show?"),
            say("What does your status bar show now?"),
            say("Could you please tell me what your status bar shows?"),
            say("So, what does the status bar show?"),
        ]
        if user:
            request = repair_request(*user[0])
            texts += [
                say(request),
                say("Again: " + request),
                say(request.replace("Please", "Could you please")),
                say(request + " Thanks!"),
            ]
        return texts


class DualAnswerEarly(_Scripted):
    def plan(self, env: Any) -> list[str]:
        return [say(GREETING), say("It should be fixed now. Could you check whether it works?")]


class DualFormat(_Scripted):
    def plan(self, env: Any) -> list[str]:
        ids = _ids(env)
        first = next(((n, a) for r, n, a in _expected(env) if r == "user"), ("toggle_airplane_mode", {}))
        request = repair_request(*first)
        return [
            call(first[0], first[1]),  # a phone tool is not the agent's
            say("###STOP###"),
            "<interact>```\n" + request + "\n```</interact>",  # fenced: read as a (malformed) tool call
            say("Customer: All good now, thank you. ###TRANSFER###"),
            f"<interact>{request}</interact><answer>done</answer>",
            "<interact>" + json.dumps({"request": request}) + "</interact>",
            call("refuel_data", {"customer_id": ids["customer_id"], "line_id": ids["line_id"], "gb_amount": True}),
            call("refuel_data", {"customer_id": ids["customer_id"], "line_id": ids["line_id"], "gb_amount": "2.0"}),
        ]


class DiagnoseOnly(_Scripted):
    """Privileged: the competent policy's greeting and diagnosis, every reading that bears on the task, and no repair."""

    def plan(self, env: Any) -> list[str]:
        from arew_tau2.critiques import diagnostic_reads

        relevant = diagnostic_reads([name for _, name, _ in _expected(env)], _goal(env))
        return [say(GREETING)] + [say(text) for tool, text in READ_REQUESTS.items() if tool in relevant]


class ReadEverything(_Scripted):
    def plan(self, env: Any) -> list[str]:
        return [say(GREETING)] + [say(text) for text in READ_REQUESTS.values()]


class SpamTools(_Scripted):
    def plan(self, env: Any) -> list[str]:
        return _company_calls(env, "read") + _company_calls(env, "write")


SOLO_ADVERSARIES: dict[str, Callable[[], Policy]] = {
    "spam_reads": SpamReads,
    "spam_writes": SpamWrites,
    "repeat_calls": SoloRepeat,
    "unfinished": SoloUnfinished,
    "repair_undo": SoloRepairUndo,
    "answer_early": SoloAnswerEarly,
    "format": SoloFormat,
}
DUAL_ADVERSARIES: dict[str, Callable[[], Policy]] = {
    "shotgun": Shotgun,
    "unfinished": DualUnfinished,
    "repair_undo": DualRepairUndo,
    "shotgun_split": ShotgunSplit,
    "keyword_stuffing": KeywordStuffing,
    "negated": Negated,
    "repeat_reworded": RepeatReworded,
    "answer_early": DualAnswerEarly,
    "format": DualFormat,
    "diagnose_only": DiagnoseOnly,
    "read_everything": ReadEverything,
    "spam_tools": SpamTools,
}

AUDITS: tuple[TaskAudit, ...] = (
    TaskAudit(name=SOLO, task=SOLO, rows=_rows(SOLO), competent=SoloCompetent, adversaries=dict(SOLO_ADVERSARIES)),
    TaskAudit(name=DUAL, task=DUAL, rows=_rows(DUAL), competent=DualCompetent, adversaries=dict(DUAL_ADVERSARIES)),
)
