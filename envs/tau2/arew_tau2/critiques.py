"""The critique of each tau2 turn; each rule can be switched off (``critique_*``, :class:`Tau2Settings`).

**A tool call**, the first rule that applies: -1 malformed or unknown tool, bad argument names or
ill-typed arguments (strict JSON types: ``true`` or ``"2.0"`` is no number; such a call never
reaches tau2; ``critique_invalid``); -1 the tool failed (``critique_tool_error``); -1 the same call
(name and arguments) was made before from the same environment state, i.e. the same agent and
user database hashes (``critique_repeat``); +1 the call newly matches an expected action of the
task, compared as tau2's ActionEvaluator does (name and compared arguments, requestor ignored;
``critique_expected_action``); -1 a WRITE tool that succeeded but changed neither database
(``critique_noop_write``); -1 a WRITE tool that succeeded, changed a database and matches no
expected action of the task at all (``critique_unneeded_write``: it changed something the task
does not need changed: a setting that was right, the wrong network mode, a suspended line); -1 a
WRITE that matches an expected action already matched and takes the databases back to a state
the episode was in before (``critique_undone_repair``: toggling a repair back); +1 a phone
reading, new in the episode as (tool, output), that bears on the task (:func:`diagnostic_reads`;
``critique_information``: in solo control the agent diagnoses itself, and a necessary diagnosis
must not be worth less than skipping it); 0 otherwise. A failing call that matches an expected action still gets -1 (and still counts for
tau2). An expected action that changes nothing (``reboot_device`` with nothing to reset: 2 base
tasks) is the task's own step, so its match outranks the no-op rule. An expected action listed
twice (3 base tasks list ``reboot_device`` twice) is matched by the first call, so replaying its
second occurrence gets 0, or -1 when it changes nothing: tau2 itself needs only one such call. A
call that matches an expected action already matched is not "unneeded": it gets 0 (a second
reboot after the line is resumed), or -1 when it toggles the repair back (``undone_repair``).

**The end.** The decision that ends the episode (the agent's ``<answer>`` stop, 0 otherwise; in dual
control also the message after which the customer ends the call) gets -1 while the scenario's
success reading (``arew_tau2.customer.offline.goal_of``: MMS sends, the speed test is excellent,
the status bar shows signal) has not shown success since the databases last changed
(``critique_unverified_end``). A task without a success reading, or whose resolution is a transfer
that was made, ends without it. Without this rule the expected repairs without the last one earned
more critique than doing the task (solo +0.77 against +0.42 at reward 0), and a goodbye before
checking the fix was paid like progress.

**Why these rules.** A trained policy learns whatever earns +1. The offline customer used to act
on sentences that ask for nothing ("Resetting your APN settings is not necessary right now."),
and one message naming every repair got +1 from the one that happened to be needed (51 of 80
messages of such a scripted agent got +1; it reached tau2's reward on 1 task in 20). tau2's
expected actions are the repair the task needs, so a write outside them is a change the task
does not need (a toggle that was right, a suspended line), and asking for one is the cost of
not diagnosing; a reading counts once per distinct output and only where it bears on the task,
so reading everything is not a way to farm +1 either. ``envs/tau2/arew_tau2/audit.py`` plays these
adversaries against a competent policy (``benchmarks/critique_exploits.py``).

**A message** (dual control). Only the customer's phone calls that the message asked for count
(:func:`arew_tau2.customer.reading.requested_tools`: the tools of the actions and readings
the message requests, by the offline customer's reading, and the goal reading when it says the
issue is fixed or asks to try again), whichever customer made them: a call the LLM customer makes
on its own initiative earns the message nothing and costs it nothing. In order:

- -1 when the customer made a WRITE call the message asked for that matches no expected
  action of the task (``critique_unneeded_write``), whether it changed anything, changed
  nothing or failed, and whatever else the reply brought. This is
  the rule against naming repairs without diagnosing: a message that asks for every repair at
  once, or for one that is not needed, gets -1 even when one of its repairs was the right one,
  so a policy cannot buy the +1 of a needed repair with unneeded ones. A request that leads to
  no write (the customer looked first and the phone was already so) costs nothing.
- +1 when the customer's reply newly brings information (``critique_information``): (a) an
  identity value of the task's ``known_info`` (the phone number, compared by digits; the full
  name after "You are"; the country after "abroad in"/"at home in") appears in the reply for
  the first time (:func:`identity_items`, :func:`revealed_items`); (b) during the reply the
  customer ran a READ phone tool the message asked for whose (tool, output) pair is new in the
  episode and that is diagnostic for the task (:func:`diagnostic_reads`: the status bar, the
  scenario's success reading, and the readings that show the state an expected action
  changes, e.g. the APN settings when the task resets them; the same output read again, by
  any call, is no news, and reading everything the phone shows earns only the readings that
  bear on the task); or (c) during the reply a customer call the message asked for newly matched an expected
  user-side action (the message led the customer to a repair).
- -1 when the customer made a call the message asked for that toggled a repair back
  (``critique_undone_repair``), whatever else the reply brought.
- -1 when the message repeats an earlier one (same lower-case words in order) and brought
  none of that (``critique_repeat``); 0 otherwise.

An invalid message (empty, no words, too long) is -1 under ``critique_invalid``.
"""

from __future__ import annotations

import re

from arew_tau2.settings import Tau2Settings

NEUTRAL = (0, "neutral")

_PHONE = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")
_NAME = re.compile(r"You are ([A-Z][\w'.-]*(?: [A-Z][\w'.-]*)+)")
_PLACE = re.compile(r"\b(?:abroad|at home) in (?:the )?([A-Z]\w*(?: [A-Z]\w*)*)")
_DIGITS = re.compile(r"\d[\d\s().+-]{6,}\d")


# the phone readings that show the state an expected action changes (company-side ones: what the phone shows of them)
DIAGNOSIS: dict[str, tuple[str, ...]] = {
    "toggle_airplane_mode": ("check_network_status",),
    "toggle_data": ("check_network_status",),
    "toggle_roaming": ("check_network_status",),
    "enable_roaming": ("check_network_status",),
    "disable_roaming": ("check_network_status",),
    "set_network_mode_preference": ("check_network_mode_preference", "check_network_status"),
    "reset_apn_settings": ("check_apn_settings",),
    "set_apn_settings": ("check_apn_settings",),
    "reseat_sim_card": ("check_sim_status", "check_network_status"),
    "resume_line": ("check_network_status", "check_sim_status"),
    "toggle_wifi_calling": ("check_wifi_calling_status",),
    "toggle_data_saver_mode": ("check_data_restriction_status",),
    "connect_vpn": ("check_vpn_status",),
    "disconnect_vpn": ("check_vpn_status",),
    "grant_app_permission": ("check_app_permissions", "check_app_status"),
    "make_payment": ("check_payment_request",),
    "send_payment_request": ("check_payment_request",),
    "toggle_wifi": ("check_wifi_status",),
    "refuel_data": ("run_speed_test", "check_network_status"),
}


def diagnostic_reads(expected: list[str] | tuple[str, ...], goal_tool: str | None) -> frozenset[str]:
    """The phone readings that bear on a task whose expected actions are named ``expected``: the status
    bar (the first look of any diagnosis), the scenario's success reading and each action's :data:`DIAGNOSIS`."""
    reads = {"check_status_bar", *(() if goal_tool is None else (goal_tool,))}
    for name in expected:
        reads.update(DIAGNOSIS.get(name, ()))
    return frozenset(reads)


def invalid_critique(settings: Tau2Settings) -> int:
    return -1 if settings.critique_invalid else 0


def tool_call_critique(
    settings: Tau2Settings,
    *,
    tool_error: bool,
    repeat: bool,
    new_action: bool,
    noop_write: bool,
    unneeded_write: bool = False,
    undone_repair: bool = False,
    new_reading: bool = False,
) -> tuple[int, str]:
    """(critique, rule) of a call that reached tau2; ``new_reading``: a phone reading new in the episode that bears on the task."""
    for rule, applies, switched_on, value in (
        ("tool_error", tool_error, settings.critique_tool_error, -1),
        ("repeat", repeat, settings.critique_repeat, -1),
        ("expected_action", new_action, settings.critique_expected_action, 1),
        ("noop_write", noop_write, settings.critique_noop_write, -1),
        ("unneeded_write", unneeded_write, settings.critique_unneeded_write, -1),
        ("undone_repair", undone_repair, settings.critique_undone_repair, -1),
        ("information", new_reading, settings.critique_information, 1),
    ):
        if applies and switched_on:
            return value, rule
    return NEUTRAL


def message_critique(
    settings: Tau2Settings, *, news: bool, repeat: bool, unneeded_write: bool = False, undone_repair: bool = False
) -> tuple[int, str]:
    """(critique, rule) of a valid message to the customer; ``news``: the reply brought information;
    ``unneeded_write``: the customer made a write the message asked for that matches no expected action;
    ``undone_repair``: one that changed the phone again as an expected action already matched asks."""
    if unneeded_write and settings.critique_unneeded_write:
        return -1, "unneeded_write"
    if undone_repair and settings.critique_undone_repair:
        return -1, "undone_repair"
    if news and settings.critique_information:
        return 1, "information"
    if repeat and not news and settings.critique_repeat:
        return -1, "repeat"
    return NEUTRAL


def end_critique(settings: Tau2Settings, critique: tuple[int, str], *, verified: bool) -> tuple[int, str]:
    """(critique, rule) of the decision that ends the episode, whose own critique is ``critique``: -1 when the
    success reading has not shown success since the phone last changed (``verified``), else its own."""
    if not verified and settings.critique_unverified_end:
        return -1, "unverified_end"
    return critique


def identity_items(known_info: str | None) -> dict[str, str]:
    """The identity values of a task's ``known_info``: label -> value as matched in a reply."""
    text = known_info or ""
    items = {f"phone:{m}": re.sub(r"\D", "", m) for m in _PHONE.findall(text)}
    items.update({f"name:{m}": m.lower() for m in _NAME.findall(text)})
    items.update({f"place:{m}": m.lower() for m in _PLACE.findall(text)})
    return items


def revealed_items(items: dict[str, str], reply: str) -> set[str]:
    lower = reply.lower()
    digit_runs = {re.sub(r"\D", "", m) for m in _DIGITS.findall(reply)}
    found = set()
    for label, value in items.items():
        if label.startswith("phone:"):
            if any(value in run for run in digit_runs):
                found.add(label)
        elif value and value in lower:
            found.add(label)
    return found
