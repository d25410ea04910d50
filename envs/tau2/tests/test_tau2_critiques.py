"""The critiques that keep repairs without diagnosis from paying: unneeded writes (solo calls and dual
messages), only the customer calls a message asked for count (offline and LLM customers), and only
readings that bear on the task are news."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("aiohttp")

from arew_tau2.critiques import diagnostic_reads, message_critique, tool_call_critique
from arew_tau2.customer import LLMCustomer, LLMCustomerConfig
from arew_tau2.env import Tau2Env
from arew_tau2.settings import Tau2Settings

MMS_TASK = (
    "[mms_issue]airplane_mode_on|bad_network_preference|bad_wifi_calling|break_apn_mms_setting|break_app_both_permissions"
    "|data_mode_off|data_usage_exceeded|unseat_sim_card|user_abroad_roaming_disabled_off[PERSONA:Hard]"
)


def call(name, **arguments) -> str:
    return "<interact>" + json.dumps({"name": name, "arguments": arguments}) + "</interact>"


def say(text: str) -> str:
    return f"<interact>{text}</interact>"


@pytest.fixture(scope="module")
def task(telecom):
    tasks, _ = telecom
    return tasks[MMS_TASK]


def play(env, texts):
    async def go():
        return [await env.act(text) for text in texts]

    return asyncio.run(go())


def test_the_rules_in_order():
    on = Tau2Settings()
    assert tool_call_critique(
        on, tool_error=False, repeat=False, new_action=False, noop_write=False, unneeded_write=True
    ) == (-1, "unneeded_write")
    assert tool_call_critique(
        on, tool_error=False, repeat=False, new_action=True, noop_write=False, unneeded_write=False
    ) == (1, "expected_action")
    assert message_critique(on, news=True, repeat=False, unneeded_write=True) == (
        -1,
        "unneeded_write",
    )  # a repair does not buy an unneeded one
    assert message_critique(on, news=True, repeat=False) == (1, "information")
    assert message_critique(on, news=True, repeat=False, undone_repair=True) == (-1, "undone_repair")
    assert tool_call_critique(on, tool_error=False, repeat=False, new_action=False, noop_write=False, new_reading=True) == (1, "information")
    off = Tau2Settings(critique_unneeded_write=False)
    assert message_critique(off, news=True, repeat=False, unneeded_write=True) == (1, "information")
    assert tool_call_critique(
        off, tool_error=False, repeat=False, new_action=False, noop_write=False, unneeded_write=True
    ) == (0, "neutral")
    assert diagnostic_reads(["reset_apn_settings"], "can_send_mms") == {
        "check_status_bar",
        "can_send_mms",
        "check_apn_settings",
    }


# ---- solo --------------------------------------------------------------------------------------
def test_solo_write_that_no_expected_action_names_is_minus_one(task):
    assert not any(a.name == "toggle_data_saver_mode" for a in task.evaluation_criteria.actions)
    env = Tau2Env(task, "solo")
    saver, airplane, back, again = play(
        env,
        [
            call("toggle_data_saver_mode"),
            call("toggle_airplane_mode"),
            call("toggle_airplane_mode"),
            call("toggle_data_saver_mode"),
        ],
    )
    assert (saver.critique, saver.info["rule"], saver.info["unneeded_write"]) == (-1, "unneeded_write", True)
    assert airplane.critique == 1
    # an expected action again is not "unneeded", but changing the phone back undoes the repair
    assert (back.critique, back.info["rule"], back.info["unneeded_write"]) == (-1, "undone_repair", False)
    assert again.critique == -1 and again.info["rule"] == "unneeded_write" and env.proxies()["unneeded_writes"] == 2.0
    assert play(env, [call("toggle_wifi")])[0].info["rule"] == "noop_write"  # in airplane mode Wi-Fi cannot change
    off = Tau2Env(task, "solo", settings=Tau2Settings(critique_unneeded_write=False))
    assert play(off, [call("toggle_data_saver_mode")])[0].critique == 0
    kept = Tau2Env(task, "solo", settings=Tau2Settings(critique_undone_repair=False))
    assert [step.critique for step in play(kept, [call("toggle_airplane_mode"), call("toggle_airplane_mode")])] == [1, 0]


def test_solo_a_necessary_reading_is_worth_more_than_skipping_it(task):
    """A phone reading that bears on the task, new in the episode, earns +1; the same output again, or one that
    does not bear on the task, 0."""
    env = Tau2Env(task, "solo")
    status, again, vpn, airplane, changed = play(
        env, [call("check_status_bar"), call("check_status_bar"), call("check_vpn_status"), call("toggle_airplane_mode"), call("check_status_bar")]
    )
    assert (status.critique, status.info["rule"], status.info["new_reading"]) == (1, "information", True)
    assert again.critique == -1 and again.info["rule"] == "repeat"  # the same call from the same state
    assert vpn.critique == 0 and not vpn.info["new_reading"]  # this task's repairs do not touch the VPN
    assert airplane.critique == 1 and changed.critique == 1  # the phone changed: its status bar is news


@pytest.mark.parametrize("mode", ["solo", "dual"])
def test_ending_before_the_success_reading_shows_success_is_minus_one(task, mode):
    from arew_tau2.audit import DualCompetent, SoloCompetent

    early = Tau2Env(task, mode)
    assert early.answer("<answer>Done.</answer>").info["rule"] == "unverified_end" and early.reward() == 0.0
    solved = Tau2Env(task, mode)
    steps = play(solved, (SoloCompetent if mode == "solo" else DualCompetent)().plan(solved))  # the repairs, then the success reading
    if mode == "solo":
        final = solved.answer("<answer>Done.</answer>")
        assert (final.critique, final.info["rule"], final.info["reward"]) == (0, "stop", 1.0)
    else:  # the customer saw it work during the last message's reply, and ended the call
        assert steps[-1].done and steps[-1].critique == 1 and steps[-1].info["rule"] == "information" and solved.reward() == 1.0
        hung_up = Tau2Env(task, mode)
        goodbye = play(hung_up, [say("Hi!"), say("Thanks for calling, goodbye!")])[-1]
        assert goodbye.done and (goodbye.critique, goodbye.info["rule"]) == (-1, "unverified_end")
    off = Tau2Env(task, mode, settings=Tau2Settings(critique_unverified_end=False))
    assert off.answer("<answer>Done.</answer>").critique == 0


def test_a_change_after_the_success_reading_needs_a_new_one(task):
    from arew_tau2.customer.offline import goal_of

    env = Tau2Env(task, "solo")
    play(env, [call(a.name, **a.arguments) for a in env._expected] + [call(goal_of(task)[0]), call("toggle_data_saver_mode")])
    assert env.answer("<answer>Done.</answer>").info["rule"] == "unverified_end"


# ---- dual control, the offline customer --------------------------------------------------------
def test_dual_shotgun_is_minus_one_even_with_a_needed_repair(task):
    env = Tau2Env(task, "dual")
    hello, shotgun = play(
        env, [say("Hi!"), say("Please toggle airplane mode, toggle your Wi-Fi and connect your VPN.")]
    )
    assert shotgun.critique == -1 and shotgun.info["rule"] == "unneeded_write"
    assert shotgun.info["new_actions"] and set(shotgun.info["unneeded_writes"]) == {"toggle_wifi", "connect_vpn"}
    assert env.proxies()["unneeded_writes"] == 2.0 and env._matched[0]  # the needed repair still counts for tau2


def test_dual_targeted_requests_earn_and_negated_ones_do_not(task):
    env = Tau2Env(task, "dual")
    texts = [
        say("Hi!"),
        say("Resetting your APN settings is not necessary right now."),
        say("Turning airplane mode on would cut your service, so please leave it alone."),
        say("Airplane mode is on."),
        say("We might need to restart your phone later, but not yet."),
        say("What does your status bar show?"),
        say("Could you tell me which apps are installed?"),  # a reading that does not bear on this task
        say("What does your status bar show right now?"),  # the same output again
        say("Airplane mode is on; please turn it off."),
        say("Please turn off airplane mode."),  # already off: the customer looks (a new reading) and changes nothing
        say("Please switch airplane mode off."),  # the same reading again: no news
    ]
    steps = play(env, texts)
    assert [s.critique for s in steps] == [0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0]
    assert all(s.info["customer_tools"] == [] for s in steps[1:5])
    assert steps[5].info["new_readings"] == ["check_status_bar"] and steps[6].info["new_readings"] == []
    assert steps[6].info["customer_tools"] == ["check_installed_apps"]
    assert steps[8].info["new_actions"] and steps[8].info["unneeded_writes"] == []
    assert steps[9].info["customer_tools"] == steps[10].info["customer_tools"] == ["check_network_status"]


# ---- dual control, the LLM customer: only what the message asked for counts ---------------------
def tool_reply(*names):
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}} for i, n in enumerate(names)
    ]
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": calls},
                "finish_reason": "tool_calls",
            }
        ]
    }


async def test_llm_customer_calls_count_only_when_asked(serve, task):
    script = [
        tool_reply("toggle_airplane_mode"),  # "Airplane mode is on." asks nothing: the LLM repairs on its own
        "I turned it off.",
        tool_reply("connect_vpn"),  # "Your VPN looks fine." asks nothing: an unneeded write on its own
        "I connected my VPN.",
        tool_reply("toggle_wifi"),  # asked for, and not needed
        "Done.",
        tool_reply("check_status_bar"),  # asked for: a diagnostic reading
        "It shows no signal.",
    ]
    server, url = await serve(lambda n, body: script[n])
    customer = LLMCustomer(task, LLMCustomerConfig(url=url, backoff=0.0, timeout=2.0))
    env = Tau2Env(task, "dual", customer=customer)
    unasked = await env.act(say("Airplane mode is on."))
    vpn = await env.act(say("Your VPN looks fine."))
    wifi = await env.act(say("Please toggle your Wi-Fi."))
    bar = await env.act(say("What does your status bar show?"))
    assert (unasked.critique, unasked.info["customer_tools"], unasked.info["new_actions"]) == (
        0,
        ["toggle_airplane_mode"],
        [],
    )
    assert env._matched[0]  # tau2 still credits the repair
    assert (vpn.critique, vpn.info["customer_tools"], vpn.info["unneeded_writes"]) == (0, ["connect_vpn"], [])
    assert (wifi.critique, wifi.info["rule"], wifi.info["unneeded_writes"]) == (-1, "unneeded_write", ["toggle_wifi"])
    assert (bar.critique, bar.info["new_readings"]) == (1, ["check_status_bar"])
    assert customer.stats.fallbacks == 0
