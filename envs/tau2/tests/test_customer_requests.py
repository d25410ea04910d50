"""What the offline customer takes as a request: negated, deferred, hypothetical and stated phrasings ask
nothing; pronouns, "do that", "go to X and choose Y", "allow APP to access PERMISSION" and "please pay
it" ask; arguments come from the message, never from the task's expected actions; and
:func:`requested_tools` names the tools a message asks for."""

from __future__ import annotations

import pytest

from arew_tau2.customer import DeviceResult, OfflineCustomer, prompts
from arew_tau2.customer.reading import requested_tools, requests
from arew_tau2.runtime import ToolCall, new_environment, runtime

# airplane mode on, mobile data off, roaming off while abroad, APN broken, both app permissions missing, SIM out
MMS_TASK = (
    "[mms_issue]airplane_mode_on|bad_network_preference|bad_wifi_calling|break_apn_mms_setting|break_app_both_permissions"
    "|data_mode_off|data_usage_exceeded|unseat_sim_card|user_abroad_roaming_disabled_off[PERSONA:Hard]"
)


class Phone:
    """tau2's phone for one task, as the customer's device (calls as requestor "user")."""

    def __init__(self, task):
        self.env = new_environment(task, solo=False)
        self.user_tools = [spec.schema for spec in runtime().user_tools.values()]
        self.calls: list[tuple[str, dict]] = []

    def call(self, name, arguments):
        self.calls.append((name, dict(arguments)))
        result = self.env.get_response(
            ToolCall(id=f"u{len(self.calls)}", name=name, arguments=dict(arguments), requestor="user")
        )
        return DeviceResult(result.content or "", bool(result.error))

    def writes(self) -> list[str]:
        return [name for name, _ in self.calls if runtime().user_tools[name].kind == "write"]


@pytest.fixture(scope="module")
def task(telecom):
    tasks, _ = telecom
    return tasks[MMS_TASK]


def answer(task, message):
    """The customer's reply to ``message`` after a greeting, and the phone calls it made."""
    customer, phone = OfflineCustomer(task), Phone(task)
    customer.respond("Hello, how can I help you?", phone)
    phone.calls.clear()
    return customer.respond(message, phone), phone


# ---- asks for no action ------------------------------------------------------------------------
NO_ACTION = [
    # the audit's phrases
    "Resetting your APN settings is not necessary right now.",
    "We might need to restart your phone later, but not yet.",
    "Turning airplane mode on would cut your service, so please leave it alone.",
    "Airplane mode is on.",
    # negations
    "Don't reset your APN settings.",
    "Please do not turn off airplane mode.",
    "There's no need to restart your phone.",
    "You don't need to toggle airplane mode.",
    "Never reset the APN settings.",
    "Restarting your phone won't be necessary.",
    "Toggling data roaming is unnecessary.",
    "Please leave airplane mode as it is.",
    "Keep your VPN as it is.",
    "Please don't touch the mobile data.",
    "Airplane mode is fine, leave it alone.",
    "Don't do that to your mobile data.",
    # deferrals and hypotheses
    "Let's hold off on resetting the APN for now.",
    "We'll reset your APN settings later.",
    "Restart your phone, but not yet.",
    "At some point we may need to toggle your mobile data.",
    "We may need to reset your APN settings.",
    "You might have to reseat your SIM card.",
    "If that doesn't work, restart your phone.",
    "If the problem persists, we will toggle airplane mode.",
    "Restart your phone, if needed.",
    "Changing the network mode would disconnect you.",
    "Toggling airplane mode will cut your connection.",
    "Turning on data roaming could cause extra charges, so let's not do it now.",
    "Before we reset the APN, let me look at your account.",
    "A restart might help.",
    # statements: of the phone's state, and of the agent's own doing
    "Mobile data is off.",
    "Your VPN is connected.",
    "Your network mode is set to 2G only.",
    "Your SIM card seems to be missing.",
    "It looks like airplane mode is on.",
    "I see that your mobile data is off.",
    "I checked your line and data roaming is disabled.",
    "I'll enable roaming on your line now.",
    "I've sent you a payment request.",
    "Thanks for restarting your phone.",
    "Have you tried restarting your phone?",
    "Did you turn off airplane mode?",
    # a bag of keywords
    "airplane mode mobile data roaming apn vpn sim card restart reboot status bar speed test permissions fixed",
]


@pytest.mark.parametrize("message", NO_ACTION)
def test_negated_deferred_and_stated_phrasings_ask_for_no_action(task, message):
    assert not [kind for kind, _ in requests(message) if kind == "write"], requests(message)
    turn, phone = answer(task, message)
    assert phone.writes() == [] and "I did that" not in turn.text
    assert not {"toggle_airplane_mode", "toggle_data", "reset_apn_settings", "reboot_device"} & requested_tools(message)


@pytest.mark.parametrize(
    "message",
    [
        "Airplane mode is on.",
        "Resetting your APN settings is not necessary right now.",
        "I checked your line and data roaming is disabled.",
        "airplane mode mobile data roaming apn vpn sim card status bar speed test permissions mms signal payment",
    ],
)
def test_statements_ask_for_no_reading_either(task, message):
    turn, phone = answer(task, message)
    assert requests(message) == [] and phone.calls == [] and turn.text == prompts.NEUTRAL


def test_leave_it_alone_cancels_the_feature_for_the_whole_message(task):
    message = (
        "Turning airplane mode on would cut your service, so please leave it alone. Also, please toggle airplane mode."
    )
    assert requests(message) == []
    assert requests("Turn off airplane mode, not mobile data.") == [("write", "airplane")]
    assert requests("Please turn on mobile data but not roaming.") == [("write", "mobile_data")]


# ---- asks for an action ------------------------------------------------------------------------
ACTIONS = [
    # the audit's phrases
    ("Airplane mode is on; please turn it off.", "toggle_airplane_mode"),
    ("Go to APN settings and choose reset to default.", "reset_apn_settings"),
    ("Can you allow the messaging app to access SMS?", "grant_app_permission"),
    ("roaming has to be enabled on your phone. Please do that.", "toggle_roaming"),
    ("I have sent you a payment request. Please pay it.", "make_payment"),
    # neighbours: pronouns, "do that", navigation, permissions, payment
    ("Airplane mode is on, so please turn it off.", "toggle_airplane_mode"),
    ("Your phone is in airplane mode. Could you switch it off?", "toggle_airplane_mode"),
    ("If airplane mode is on, please turn it off.", "toggle_airplane_mode"),
    ("Mobile data is off; please turn it on.", "toggle_data"),
    ("Mobile data must be enabled. Go ahead.", "toggle_data"),
    ("Data roaming needs to be turned on. Could you do that?", "toggle_roaming"),
    ("Your APN settings are broken. Please reset them to the defaults.", "reset_apn_settings"),
    ("Open your APN settings and tap reset to default.", "reset_apn_settings"),
    ("Please allow the messaging app to access storage.", "grant_app_permission"),
    ("Could you give the messaging app permission to use storage?", "grant_app_permission"),
    ("Please check your payment request and pay it.", "make_payment"),
    ("Please pay the bill.", "make_payment"),
    ("Take the SIM card out and put it back in.", "reseat_sim_card"),
    ("Try restarting your phone.", "reboot_device"),
    ("I'd recommend restarting your phone.", "reboot_device"),
    ("I need you to restart your phone.", "reboot_device"),
    ("We need to turn off airplane mode on your phone.", "toggle_airplane_mode"),
    ("Airplane mode off, please.", "toggle_airplane_mode"),
    ("Please set your network mode to 4G/5G preferred.", "set_network_mode_preference"),
]


@pytest.mark.parametrize("message, tool", ACTIONS)
def test_plain_requests_are_done(task, message, tool):
    turn, phone = answer(task, message)
    assert phone.writes() == [tool], (phone.calls, turn.text)
    assert tool in requested_tools(message)


def test_the_audit_phrases_do_what_they_ask(task):
    turn, phone = answer(task, "Airplane mode is on; please turn it off.")
    assert (
        phone.calls == [("check_network_status", {}), ("toggle_airplane_mode", {})]
        and "Airplane Mode is now OFF" in turn.text
    )
    turn, phone = answer(task, "Can you allow the messaging app to access SMS?")
    assert phone.calls == [("grant_app_permission", {"app_name": "messaging", "permission": "sms"})]
    turn, phone = answer(task, "roaming has to be enabled on your phone. Please do that.")
    assert (
        phone.calls == [("check_network_status", {}), ("toggle_roaming", {})] and "Data Roaming is now ON" in turn.text
    )
    turn, phone = answer(task, "Airplane mode is off; please leave it off.")  # a statement and a "keep": nothing
    assert phone.calls == []


def test_questions_ask_for_readings_not_actions(task):
    assert requests("Is airplane mode on?") == [("read", "airplane")]
    assert requests("Airplane mode is on?") == [("read", "airplane")]
    assert requests("Did you turn off airplane mode?") == [("read", "airplane")]
    assert requests("What does your status bar show?") == [("read", "status_bar")]
    assert requests("Check the status bar, then turn off airplane mode.") == [
        ("read", "status_bar"),
        ("write", "airplane"),
    ]


def test_arguments_come_from_the_message_not_the_expected_actions(task):
    customer, phone = OfflineCustomer(task), Phone(task)
    assert customer.pending()  # the task expects a network mode and two permissions...
    for message, reply in (
        ("Please change your network mode.", prompts.ASK_MODE),
        ("Please grant the messaging app the permissions it needs.", prompts.ASK_PERMISSION),
        ("Please change your APN settings.", prompts.ASK_APN),
    ):
        assert customer.respond(message, phone).text.endswith(reply) and phone.writes() == []
    customer.respond("Please set your network mode to 3G only.", phone)  # ...but the customer does what it is told
    assert phone.calls[-1] == ("set_network_mode_preference", {"mode": "3g_only"})


def test_requested_tools_of_a_shotgun_and_of_the_fix_claim():
    shotgun = "Please toggle airplane mode, reset your APN settings, restart your phone and pay the bill."
    assert {"toggle_airplane_mode", "reset_apn_settings", "reboot_device", "make_payment"} <= requested_tools(shotgun)
    assert "check_network_status" in requested_tools(
        "Please turn off airplane mode."
    )  # the look before a directed switch
    assert requested_tools("Does it work now?", "can_send_mms") == {"can_send_mms"}
    assert requested_tools("Does it work now?") == frozenset()
    assert requested_tools(None) == frozenset() and requests(12) == []
