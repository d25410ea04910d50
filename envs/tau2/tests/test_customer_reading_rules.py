"""The offline customer's general reading rules where they must stop: a suggestion, a report, a past step, a
sequenced step, a list and a polite question read as what they are, and the words near them (a question's "says",
"let me know what", "you could", a list of readings, a sentence that only states) left as they were."""

from __future__ import annotations

import pytest

from arew_tau2.customer.reading import requests

W, R = "write", "read"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # a verb-ing asks where something asks for it, and a reboot named after a suggestion's frame asks
        ("Let's start by resetting the APN settings.", [(W, "apn")]),
        ("Would you mind running a speed test?", [(R, "speed")]),
        ("Another option would be restarting the phone.", [(W, "reboot")]),
        ("Resetting the APN is the next step.", [(W, "apn")]),
        ("It's not worth restarting the phone.", []),
        ("The fix was resetting the APN.", []),
        ("Turning off airplane mode should fix it.", []),
        ("Restarting the phone is usually the first thing we'd try.", []),
        # a report's source is a noun phrase before a reporting verb, not an embedded question
        ("Check what the status bar says and restart the phone.", [(R, "status_bar"), (W, "reboot")]),
        ("The error says to restart your phone, so please restart it.", [(W, "reboot")]),
        ("Please check the network state and enable roaming.", [(W, "roaming")]),
        ("My manager wants you to restart the phone.", [(W, "reboot")]),
        # a time past after "you" and its verb is a report, an imperative or a request is not
        ("You need to reset the APN you changed yesterday.", [(W, "apn")]),
        ("Restart the phone like you did earlier.", [(W, "reboot")]),
        ("As I said earlier, please restart your phone.", [(W, "reboot")]),
        # the agent's hedge asks, the agent's own act does not; a modal after "you" suggests
        ("I think you should turn roaming on.", [(W, "roaming")]),
        ("I think I turned roaming on for you.", []),
        ("You could turn off airplane mode.", [(W, "airplane")]),
        ("That would turn off your data.", []),
        ("If you could not reset the APN, that's fine.", []),
        # "what" asks after a verb of knowing, in a question or at the head
        ("Let me know what your status bar shows.", [(R, "status_bar")]),
        ("I was wondering whether mobile data is on.", [(R, "mobile_data")]),
        ("What's showing in your status bar?", [(R, "status_bar")]),
        # a step before a request is asked for, a step before a statement or in the past is not
        ("Once you've restarted, check the status bar.", [(W, "reboot"), (R, "status_bar")]),
        ("Once you've turned off airplane mode, the phone should reconnect.", []),
        # lists: a line that asks makes its verbless lines requests, one that checks makes them readings
        ("Please confirm the following:\n- Airplane mode off\n- Mobile data on", [(R, "airplane"), (R, "mobile_data")]),
        ("Here's what I see:\nAirplane mode on\nMobile data off", []),
        ("The steps are: turn off airplane mode, then restart.", [(W, "airplane"), (W, "reboot")]),
        # one-word sentences said apart, a tool's name used as a request, a part of a feature
        ("OK. Now restart your phone.", [(W, "reboot")]),
        ("Great. Thanks. Now turn on roaming.", [(W, "roaming")]),
        ("Please use toggle_airplane_mode to switch it off.", [(W, "airplane")]),
        ("Please turn off the Wi-Fi radio.", [(W, "wifi")]),
        ("Can you describe the status bar?", [(R, "status_bar")]),
        ("Airplane mode is off, right?", [(R, "airplane")]),
        ("Have you tried restarting your phone?", []),
        ("Did you turn off airplane mode?", [(R, "airplane")]),
    ],
)
def test_the_general_rules_stop_where_they_should(message, expected):
    assert requests(message) == expected
