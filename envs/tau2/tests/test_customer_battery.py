"""The offline customer on the phrase battery (arew_tau2.customer.battery): every message read as a careful person
reads it, but the one the reader is known to get wrong; misspellings corrected, real words left alone."""

from __future__ import annotations

import pytest

from arew_tau2.customer.battery import BATTERY
from arew_tau2.customer.reading import normalise, requests

# read otherwise than the battery says, knowingly: the fifth wave's misreadings, as they read when it was measured
# (the four waves before it read as the battery says since the rules written after the fourth): a suggestion as a
# noun phrase without a frame the reader knows ("the quickest fix would be a restart", "give your handset a
# restart"), "get X switched on", a verbless list in parenthesised numbers, "keep X on" read as turning it on,
# sarcasm with "because that worked so well", a quoted line of a FAQ acted on, an arrow for "turn to" and "wouldn't
# hurt to"
KNOWN_MISREADINGS = {
    "The quickest fix would be a restart of your phone.",
    "Let's go ahead and get Wi-Fi calling switched on.",
    "Okay, three things, in order: (1) airplane mode off, (2) restart, (3) speed test.",
    "Please keep mobile data on and don't touch roaming.",
    "Sure, let's just restart it again, because that worked so well the last five times.",
    'The FAQ line "turn off Wi-Fi calling if calls drop" doesn\'t apply to you.',
    "Give your handset a restart, would you?",
    "AIRPLANE MODE \u2192 OFF",
    "Wouldn't hurt to toggle Wi-Fi off and on.",
}


@pytest.mark.parametrize("category", list(BATTERY))
def test_the_battery_is_read_as_a_careful_person_reads_it(category):
    wrong = [(message, expected, requests(message)) for message, expected in BATTERY[category] if tuple(requests(message)) != expected]
    assert {message for message, _, _ in wrong} <= KNOWN_MISREADINGS, wrong


def test_the_known_misreadings_are_still_misread():
    battery = dict(entry for entries in BATTERY.values() for entry in entries)
    assert KNOWN_MISREADINGS <= set(battery)
    assert [message for message in KNOWN_MISREADINGS if tuple(requests(message)) == battery[message]] == []


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("please trun off airplain mode", "please turn off airplane mode"),
        ("could you restrat and chek the staus bar", "could you restart and check the status bar"),
        ("unable to send, the date is wrong, spend less", "unable to send, the date is wrong, spend less"),  # real words
        ("it is enabled, checked, resetting, turns", "it is enabled, checked, resetting, turns"),  # the reader's own forms
        ("disconnect any active vpn", "disconnect any active vpn"),
        ("plz rebot, then chcek the stauts bar", "please reboot, then check the status bar"),  # chat spelling, moved letters
        ("please reebot and swtihc it off", "please reboot and switch it off"),  # a doubled letter moved, two swaps
        ("it states the content of the report", "it states the content of the report"),  # real words two edits away
        ("the toggle_roaming tool", "the roaming tool"),  # a tool's name: its feature, not its verb
    ],
)
def test_a_misspelled_word_is_read_as_the_word_and_real_words_are_left_alone(text, read):
    assert normalise(text) == read
