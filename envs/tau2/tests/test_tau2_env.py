"""tau2 telecom episodes: replay of the expected actions, critiques, ending, proxies, isolation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter

import pytest

from arew.envs.base import Channel
from arew.envs.parsing import payload_kind
from arew_tau2.customer.offline import goal_of
from arew_tau2.env import Tau2Env
from arew_tau2.settings import Tau2Settings
from arew_tau2.tasks import build_splits

ANSWER = "<scratch>done</scratch><answer>Resolved.</answer>"


def call(name, **arguments) -> str:
    return "<scratch>go</scratch><interact>" + json.dumps({"name": name, "arguments": arguments}) + "</interact>"


def say(text: str) -> str:
    return f"<scratch>talk</scratch><interact>{text}</interact>"


def run(coro):
    return asyncio.run(coro)


def duplicated(task) -> set[str]:
    counts = Counter((a.name, json.dumps(a.arguments, sort_keys=True)) for a in task.evaluation_criteria.actions or [])
    return {name for (name, _), n in counts.items() if n > 1}


def find(base_tasks, predicate):
    return next(t for t in base_tasks if predicate(t))


def test_replaying_the_expected_actions_scores_one_on_every_base_task(base_tasks):
    assert len(base_tasks) == 114

    async def replay(task):
        env = Tau2Env(task, "solo", settings=Tau2Settings(reward="official"))
        steps = [await env.act(call(a.name, **a.arguments)) for a in env._expected]
        if goal_of(task):  # the success reading, which an ending needs
            await env.act(call(goal_of(task)[0]))
        final = env.answer(ANSWER)
        return env, steps, final

    for task in base_tasks:
        env, steps, final = run(replay(task))
        assert env.official_reward() == 1.0 and env.fractional_reward() == 1.0, task.id
        assert final.done and final.valid and final.critique == 0 and env.termination == "agent_stop"
        twice = duplicated(task)
        for action, step in zip(env._expected, steps, strict=True):
            assert step.channel == Channel.AS and step.valid
            if step.critique != 1:  # only the second call of an action the task lists twice
                assert action.name in twice and step.info["rule"] in ("neutral", "noop_write"), (task.id, action.name, step.info)
        assert sum(s.critique == 1 for s in steps) == len({a.action_id for a in env._expected}) - sum(
            n - 1 for n in Counter((a.name, json.dumps(a.arguments, sort_keys=True)) for a in env._expected).values()
        )
        assert env.proxies()["expected_actions_share"] == 1.0


def test_critiques_of_tool_calls(base_tasks):
    task = find(
        base_tasks,
        lambda t: any(a.name == "toggle_airplane_mode" for a in t.evaluation_criteria.actions or [])
        and not any(a.func_name == "break_vpn" for a in t.initial_state.initialization_actions or []),
    )
    env = Tau2Env(task, "solo", settings=Tau2Settings(reward="official"))

    async def play():
        out = {}
        out["read"] = await env.act(call("check_status_bar"))
        out["repeat"] = await env.act(call("check_status_bar"))
        out["unknown"] = await env.act(call("launch_rocket"))
        out["malformed"] = await env.act("<interact>{name: check_status_bar}</interact>")
        out["no_tag"] = await env.act("check_status_bar please")
        out["missing_arg"] = await env.act(call("get_customer_by_id"))
        out["extra_arg"] = await env.act(call("check_status_bar", loud=True))
        out["tool_error"] = await env.act(call("get_customer_by_id", customer_id="NOPE"))
        out["expected"] = await env.act(call("toggle_airplane_mode"))
        out["read_after_change"] = await env.act(call("check_status_bar"))
        out["noop_write"] = await env.act(call("disconnect_vpn"))  # the VPN is off
        return out

    out = run(play())
    assert out["read"].critique == 1 and out["read"].valid and out["read"].info["rule"] == "information"  # a reading that bears on the task
    assert "Status Bar" in out["read"].feedback and "Turn 2 of 30" in out["read"].feedback
    assert out["repeat"].critique == -1 and out["repeat"].info["rule"] == "repeat"
    for key in ("unknown", "malformed", "no_tag", "missing_arg", "extra_arg"):
        step = out[key]
        assert step.critique == -1 and not step.valid and not step.done, key
        assert step.feedback.startswith("Your turn was invalid because"), key
    assert "needs the argument" in out["missing_arg"].feedback
    assert out["tool_error"].critique == -1 and out["tool_error"].valid and out["tool_error"].info["tool_error"]
    assert out["expected"].critique == 1 and out["expected"].info["new_actions"]
    assert out["read_after_change"].critique == 1  # same call, but the state changed since: a new reading
    noop = out["noop_write"]
    assert noop.critique == -1 and noop.info["rule"] == "noop_write"
    proxies = env.proxies()
    assert proxies["invalid"] == 5 and proxies["tool_errors"] == 1 and proxies["repeats"] == 1
    assert proxies["as"][out["expected"].info["turn"] - 1] == 1
    assert proxies["turns"] == 11 and proxies["reward_official"] == 0.0  # not stopped yet


def test_rejected_calls_are_not_recorded_and_cannot_match(base_tasks):
    task = find(base_tasks, lambda t: any(a.name == "refuel_data" for a in t.evaluation_criteria.actions or []))
    env = Tau2Env(task, "solo", settings=Tau2Settings(reward="official"))
    step = run(env.act(call("refuel_data")))  # tau2 alone would count this as the expected refuel
    assert step.critique == -1 and not step.valid
    assert env.simulation_run().messages == [] and not any(env._matched)


def test_rules_can_be_switched_off(base_tasks):
    task = base_tasks[0]
    off = {"critique_invalid": False, "critique_repeat": False, "critique_tool_error": False, "critique_expected_action": False, "critique_information": False}
    env = Tau2Env(task, "solo", settings=Tau2Settings(**off))

    async def play():
        return [
            await env.act("nonsense"),
            await env.act(call("check_status_bar")),
            await env.act(call("check_status_bar")),
            await env.act(call("get_customer_by_id", customer_id="NOPE")),
            await env.act(call(env._expected[0].name, **env._expected[0].arguments)),
        ]

    assert [s.critique for s in run(play())] == [0, 0, 0, 0, 0]


def test_ending_termination_and_reward_kinds(base_tasks):
    task = base_tasks[0]
    solved = Tau2Env(task, "solo", settings=Tau2Settings(reward="fractional"))

    async def solve(env):
        for a in env._expected:
            await env.act(call(a.name, **a.arguments))

    run(solve(solved))
    assert solved.fractional_reward() == 0.0  # not stopped yet
    bad = solved.answer("I think we are done")
    assert bad.done and not bad.valid and bad.critique == -1
    assert solved.termination == "max_turns" and solved.official_reward() == 0.0 and solved.reward() == 0.0
    with pytest.raises(RuntimeError):
        solved.answer(ANSWER)
    with pytest.raises(RuntimeError):
        solved.update("x")

    half = Tau2Env(task, "solo", settings=Tau2Settings(reward="fractional"))
    run(half.act(call(task.evaluation_criteria.actions[0].name, **task.evaluation_criteria.actions[0].arguments)))
    half.answer(ANSWER)
    assert half.official_reward() == 0.0 and 0.0 < half.fractional_reward() < 1.0 and half.reward() == half.fractional_reward()
    assert half.proxies()["ended_agent_stop"] == 1.0 and half.proxies()["reward"] == half.fractional_reward()


def test_turn_budget_and_final_notice(base_tasks):
    env = Tau2Env(base_tasks[0], "solo", settings=Tau2Settings(max_turns=2))
    first = run(env.act(call("check_status_bar")))
    assert "Turn 2 of 2" in first.feedback
    last = run(env.act(call("check_network_status")))
    assert "Turn" not in last.feedback and "<answer>" in env.final_turn_notice()
    with pytest.raises(RuntimeError):
        run(env.act(call("check_sim_status")))
    assert payload_kind(ANSWER) == "answer"


def test_prompt_solo_and_dual(base_tasks, scripted):
    task = base_tasks[0]
    solo = Tau2Env(task, "solo").initial_messages()
    assert solo[0]["role"] == "system" and "<main_policy>" in solo[0]["content"]
    assert "refuel_data(customer_id: string, line_id: string, gb_amount: number)" in solo[0]["content"]
    assert "toggle_airplane_mode(): " in solo[0]["content"] and task.ticket in solo[1]["content"]
    dual = Tau2Env(task, "dual", customer=scripted()).initial_messages()
    assert "toggle_airplane_mode():" not in dual[0]["content"] and "greet the customer" in dual[1]["content"]
    assert task.ticket not in dual[1]["content"]
    assert dual[0]["content"] != solo[0]["content"]  # solo uses tau2's solo policy documents


def test_dual_control_customer_calls_are_recorded_and_rewarded(base_tasks, scripted):
    task = find(
        base_tasks,
        lambda t: set(t.evaluation_criteria.reward_basis) == {"ENV_ASSERTION"}
        and all(a.requestor == "user" for a in t.evaluation_criteria.actions),
    )
    user_actions = [(a.name, a.arguments) for a in task.evaluation_criteria.actions]
    assert user_actions[0] == ("toggle_airplane_mode", {})
    customer = scripted(
        [
            ([], "Hi, I'm John Smith, my number is 555-123-2002.", None),
            ([("check_status_bar", {})], "My status bar shows something odd.", None),
            (user_actions[:1], "I switched airplane mode, just in case.", None),  # on its own initiative
            (user_actions[1:], "Done, all of it.", None),
            ([], "Thanks, bye!", "###STOP###"),
        ]
    )
    env = Tau2Env(task, "dual", settings=Tau2Settings(reward="official"), customer=customer)
    repairs = (
        "Please set your network mode to 4G/5G preferred, toggle Wi-Fi calling, give the messaging app the storage permission"
        " and reseat your SIM card."
    )

    async def play():
        return [
            await env.act(say("Hello, how can I help?")),
            await env.act(say("What does your status bar show?")),
            await env.act(call("toggle_airplane_mode")),  # a phone tool: the agent's is unknown
            await env.act(say("Thanks, let me think about it.")),
            await env.act(say(repairs)),
            await env.act(say(repairs)),
        ]

    hello, status, phone_tool, unasked, repair, goodbye = run(play())
    assert hello.critique == 1 and hello.info["new_identity"] and "John Smith" in hello.feedback
    assert status.critique == 1 and status.info["new_readings"] == ["check_status_bar"]
    assert "Status Bar" not in status.feedback  # the customer's tool output is hidden from the agent
    assert phone_tool.critique == -1 and "customer's phone" in phone_tool.feedback
    # a repair the message did not ask for counts for tau2 but earns the message nothing
    assert unasked.critique == 0 and unasked.info["new_actions"] == []
    assert unasked.info["customer_tools"] == ["toggle_airplane_mode"]
    assert repair.critique == 1 and len(repair.info["new_actions"]) == 4
    assert goodbye.done and goodbye.critique == -1 and goodbye.info["customer_stop"] == "###STOP###"
    assert env.termination == "customer_stop" and env.official_reward() == 1.0
    proxies = env.proxies()
    assert proxies["user_repairs_share"] == 1.0 and proxies["customer_tool_calls"] == 1 + len(user_actions)
    assert proxies["ended_customer_stop"] == 1.0 and proxies["messages"] == 5
    run_ = env.simulation_run()
    user_calls = [m for m in run_.messages if m.role == "user" and m.tool_calls]
    assert [m.tool_calls[0].requestor for m in user_calls] == ["user"] * (1 + len(user_actions))
    assert run_.termination_reason.value == "user_stop"
    assert all(not r.error for r in customer.results)
    with pytest.raises(RuntimeError):
        run(env.act(say("still there?")))


def test_dual_customer_cannot_use_agent_tools_or_bad_arguments(base_tasks, scripted):
    customer = scripted([([("get_customer_by_id", {"customer_id": "C1001"}), ("grant_app_permission", {})], "Hm.", None)])
    env = Tau2Env(base_tasks[0], "dual", customer=customer)
    run(env.act(say("Hello!")))
    assert [r.error for r in customer.results] == [True, True]
    assert not any(m.role == "user" and m.tool_calls for m in env.simulation_run().messages)


def test_concurrent_episodes_equal_sequential(base_tasks):
    chosen = base_tasks[::7][:16]

    def script(task):
        actions = [call(a.name, **a.arguments) for a in task.evaluation_criteria.actions]
        return [call("check_status_bar"), *actions[: max(1, len(actions) - 1)], "junk", call("check_status_bar"), ANSWER]

    async def play(task):
        env = Tau2Env(task, "solo", settings=Tau2Settings(reward="official"))
        out = []
        for text in script(task):
            if payload_kind(text) == "answer":
                step = env.answer(text)
            else:
                step = await env.act(text)
                await asyncio.sleep(0)
            out.append((step.feedback, step.critique, step.valid))
        return out, env.official_reward(), env.fractional_reward()

    async def together():
        return await asyncio.gather(*(play(task) for task in chosen))

    sequential = [run(play(task)) for task in chosen]
    assert run(together()) == sequential


def _vpn_probe(task):
    async def probe():
        env = Tau2Env(task, "solo")
        await env.act(call("disconnect_vpn"))
        await env.act(call("connect_vpn"))
        return (await env.act(call("check_vpn_status"))).feedback

    return run(probe())


def test_break_vpn_does_not_leak_across_episodes(base_tasks):
    from tau2.domains.telecom.user_tools import TelecomUserTools

    broken = find(base_tasks, lambda t: any(a.func_name == "break_vpn" for a in t.initial_state.initialization_actions or []))
    clean = find(base_tasks, lambda t: not any(a.func_name == "break_vpn" for a in t.initial_state.initialization_actions or []))
    before = _vpn_probe(clean)
    assert "excellent" in before.lower()
    class_default = TelecomUserTools.default_vpn_details.model_dump()
    env = Tau2Env(broken, "solo")  # its initial state breaks the VPN
    assert "poor" in run(env.act(call("check_vpn_status"))).feedback.lower()
    assert "poor" in _vpn_probe(broken).lower()  # within the episode tau2's behaviour is kept
    assert TelecomUserTools.default_vpn_details.model_dump() == class_default
    assert _vpn_probe(clean) == before


def test_import_reads_no_dotenv(tmp_path):
    """Importing the environment must not load a .env (tau2 calls load_dotenv at import)."""
    code = (
        "import os, dotenv\n"
        "called = []\n"
        "dotenv.load_dotenv = lambda *a, **k: called.append(1) or True\n"
        "import arew_tau2.env\n"
        "print(len(called), dotenv.load_dotenv.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(_root()))
    assert out.stdout.split()[0] == "0"


def _root():
    from pathlib import Path

    return Path(__file__).resolve().parents[3]


def test_rows_rebuild_the_same_episode():
    splits = build_splits("tau2-solo", n_train=2, n_val=1, n_test=1, seed=3)
    info = splits["train"][1]
    a, b = Tau2Env.from_row(info, info["seed"]), Tau2Env.from_row(dict(info), info["seed"])
    assert a.initial_messages() == b.initial_messages() and a.reward_kind == "fractional"
    assert Tau2Env.from_row(splits["test"][0], 0).reward_kind == "official"
    assert Tau2Env.from_row(info, 0, reward="official").reward_kind == "official"
    options = Tau2Env.from_row(info, 0, max_turns=3, critique_repeat=False, customer_timeout=5.0)  # settings and customer's
    assert options.max_turns == 3 and options.settings == Tau2Settings(max_turns=3, critique_repeat=False)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['critique_repeats'\]"):
        Tau2Env.from_row(info, 0, critique_repeats=False)
    steps = [call("check_status_bar"), call("toggle_airplane_mode"), "bad"]
    assert [run(a.act(s)).feedback for s in steps] == [run(b.act(s)).feedback for s in steps]


def test_the_offline_customer_is_the_default_and_its_counters_reach_the_proxies():
    import asyncio

    from arew.envs.registry import make_env
    from arew_tau2.customer import OfflineCustomer
    from arew_tau2.tasks import build_splits

    info = build_splits("tau2-dual", n_train=1)["train"][0]
    env = make_env("tau2-dual", info, info["seed"])
    assert isinstance(env.customer, OfflineCustomer)
    step = asyncio.run(env.act("<interact>Hello, how can I help you today?</interact>"))
    assert step.feedback.startswith("Customer: ") and not step.done
    proxies = env.proxies()
    assert proxies["customer_calls"] == 1.0 and proxies["customer_fallbacks"] == 0.0 and proxies["messages"] == 1.0


def test_the_registry_imports_tau2_only_when_a_tau2_task_is_used():
    code = (
        "import sys, arew.envs.registry as r; assert 'tau2' not in sys.modules and 'tau2-solo' in r.task_names(); "
        "r.env_class('tau2-solo'); assert 'tau2' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(_root()))
