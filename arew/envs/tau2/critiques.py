"""The critique of each tau2 turn; each rule can be switched off (``critique_*``, :class:`Tau2Settings`).

**A tool call**, the first rule that applies: -1 malformed or unknown tool or bad argument names
(``critique_invalid``); -1 the tool failed (``critique_tool_error``); -1 the same call (name and
arguments) was made before from the same environment state, i.e. the same agent and user
database hashes (``critique_repeat``); +1 the call newly matches an expected action of the task,
compared as tau2's ActionEvaluator does (name and compared arguments, requestor ignored;
``critique_expected_action``); -1 a WRITE tool that succeeded but changed neither database
(``critique_noop_write``); 0 otherwise. A failing call that matches an expected action still gets
-1 (and still counts for tau2). An expected action that changes nothing (``reboot_device`` with
nothing to reset: 2 base tasks) is the task's own step, so its match outranks the no-op rule. An
expected action listed twice (3 base tasks list ``reboot_device`` twice) is matched by the first
call, so replaying its second occurrence gets 0, or -1 when it changes nothing: tau2 itself needs
only one such call.

**A message** (dual control): +1 when the customer's reply newly brings information
(``critique_information``): (a) an identity value of the task's ``known_info`` (the phone
number, compared by digits; the full name after "You are"; the country after "abroad in"/"at
home in") appears in the reply for the first time (:func:`identity_items`,
:func:`revealed_items`); (b) during the reply the customer ran a READ phone tool whose (tool,
output) pair is new in the episode (a diagnostic reading); or (c) during the reply a customer
call newly matched an expected user-side action (the message led the customer to a repair). -1
when the message repeats an earlier one (same lower-case words in order) and brought none of
that (``critique_repeat``); 0 otherwise. An invalid message (empty, no words, too long) is -1
under ``critique_invalid``.
"""

from __future__ import annotations

import re

from arew.envs.tau2.settings import Tau2Settings

NEUTRAL = (0, "neutral")

_PHONE = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")
_NAME = re.compile(r"You are ([A-Z][\w'.-]*(?: [A-Z][\w'.-]*)+)")
_PLACE = re.compile(r"\b(?:abroad|at home) in (?:the )?([A-Z]\w*(?: [A-Z]\w*)*)")
_DIGITS = re.compile(r"\d[\d\s().+-]{6,}\d")


def invalid_critique(settings: Tau2Settings) -> int:
    return -1 if settings.critique_invalid else 0


def tool_call_critique(
    settings: Tau2Settings, *, tool_error: bool, repeat: bool, new_action: bool, noop_write: bool
) -> tuple[int, str]:
    """(critique, rule) of a call that reached tau2."""
    for rule, applies, switched_on, value in (
        ("tool_error", tool_error, settings.critique_tool_error, -1),
        ("repeat", repeat, settings.critique_repeat, -1),
        ("expected_action", new_action, settings.critique_expected_action, 1),
        ("noop_write", noop_write, settings.critique_noop_write, -1),
    ):
        if applies and switched_on:
            return value, rule
    return NEUTRAL


def message_critique(settings: Tau2Settings, *, news: bool, repeat: bool) -> tuple[int, str]:
    """(critique, rule) of a valid message to the customer; ``news``: the reply brought information."""
    if news and settings.critique_information:
        return 1, "information"
    if repeat and not news and settings.critique_repeat:
        return -1, "repeat"
    return NEUTRAL


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
