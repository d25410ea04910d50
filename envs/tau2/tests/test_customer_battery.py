"""The offline customer on the phrase battery (arew_tau2.customer.battery): every message read as a careful person
reads it, but the one the reader is known to get wrong; misspellings corrected, real words left alone."""

from __future__ import annotations

import pytest

from arew_tau2.customer.battery import BATTERY
from arew_tau2.customer.reading import normalise, requests

# read otherwise than the battery says, knowingly: a rhetorical question about a repair reads as asking for its state;
# of the messages written after the rules, a suggestion as a noun phrase and a two-letter misspelling;
# of the third wave, sarcasm with "as if", an unknown action on a known feature, and a tool name quoted as a
# statement without "the tool" (the second wave's two unknown reports and the third's "it might be worth ..." were
# fixed after they were measured, and so was the second's lettered list)
KNOWN_MISREADINGS = {
    "Yeah, toggling airplane mode is the magic cure for all problems, right?",
    "What I'd suggest is restarting your phone.",
    "Please reebot your phone.",
    "Right, as if resetting the APN ever helped anyone.",
    "Could you update the roaming firmware?",
    "The reset_apn_settings tool exists for cases like this.",
}


@pytest.mark.parametrize("category", list(BATTERY))
def test_the_battery_is_read_as_a_careful_person_reads_it(category):
    wrong = [(message, expected, requests(message)) for message, expected in BATTERY[category] if tuple(requests(message)) != expected]
    assert {message for message, _, _ in wrong} <= KNOWN_MISREADINGS, wrong


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("please trun off airplain mode", "please turn off airplane mode"),
        ("could you restrat and chek the staus bar", "could you restart and check the status bar"),
        ("unable to send, the date is wrong, spend less", "unable to send, the date is wrong, spend less"),  # real words
        ("it is enabled, checked, resetting, turns", "it is enabled, checked, resetting, turns"),  # the reader's own forms
        ("disconnect any active vpn", "disconnect any active vpn"),
    ],
)
def test_a_misspelled_word_is_read_as_the_word_and_real_words_are_left_alone(text, read):
    assert normalise(text) == read
