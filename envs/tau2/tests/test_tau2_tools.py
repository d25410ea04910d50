"""The tool-call parser and the compact tool list; no text may raise out of the parser or a round."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arew.envs.parsing import MAX_TEXT_CHARS, ParseResult
from arew_tau2.env import EpisodeDevice, Tau2Env
from arew_tau2.runtime import runtime
from arew_tau2.settings import Tau2Settings
from arew_tau2.tools import (
    ToolRequest,
    check_arguments,
    looks_like_tool_call,
    message_key,
    parse_message,
    parse_tool_call,
    render_tools,
    show_output,
    type_problem,
)


@pytest.mark.parametrize(
    "payload, name, arguments",
    [
        ('{"name": "check_status_bar", "arguments": {}}', "check_status_bar", {}),
        ('  {"name": "check_status_bar"}  ', "check_status_bar", {}),
        ('```json\n{"name": "get_customer_by_id", "arguments": {"customer_id": "C1001"}}\n```', "get_customer_by_id", {"customer_id": "C1001"}),
        ('```\n{"name": "x", "parameters": {"a": 1}}\n```', "x", {"a": 1}),
        ('{"name": "x", "args": {"a": [1, 2]}}', "x", {"a": [1, 2]}),
        ('{"name": "x", "arguments": "{\\"a\\": 2.5}"}', "x", {"a": 2.5}),
        ('{"name": " x ", "arguments": null}', "x", {}),
    ],
)
def test_accepted_calls(payload, name, arguments):
    result = parse_tool_call(payload)
    assert result.ok and result.value == ToolRequest(name, arguments)


@pytest.mark.parametrize(
    "payload, reason",
    [
        ("", "empty"),
        ("check_status_bar()", "valid JSON"),
        ("[1, 2]", "JSON object"),
        ('"name"', "JSON object"),
        ('{"name": 3}', '"name"'),
        ('{"name": ""}', '"name"'),
        ('{"arguments": {}}', '"name"'),
        ('{"name": "x", "arguments": [1]}', '"arguments"'),
        ('{"name": "x", "arguments": "not json"}', '"arguments"'),
        ('{"name": "x", "arguments": {}, "args": {}}', "once"),
        ('{"name": "x", "requestor": "user"}', "only"),
        ('{"name": "x", "arguments": {"a": NaN}}', "finite"),
        ('{"name": "x", "arguments": {"a": 1e999}}', "finite"),
        ('{"name": "' + "x" * 100 + '"}', "longer"),
        ("[" * 100_000, "longer"),
        ("[" * 5_000 + "]" * 5_000, "JSON"),
    ],
)
def test_rejected_calls(payload, reason):
    result = parse_tool_call(payload)
    assert not result.ok and reason in result.error


def test_arguments_messages_and_output():
    assert check_arguments("f", {}, {"a"}, {"a"}) == "f needs the argument(s) ['a']"
    assert "takes no argument" in check_arguments("f", {"b": 1}, set(), set())
    assert check_arguments("f", {"a": 1}, {"a"}, {"a", "b"}) is None
    assert looks_like_tool_call(' {"name": 1}') and looks_like_tool_call("```json") and not looks_like_tool_call("Hello {there}")
    assert parse_message("  Hi there  ").value == "Hi there" and not parse_message("123").ok and not parse_message("a" * 3000).ok
    assert message_key("Could you, please, REBOOT?") == message_key("could you please reboot")
    assert show_output('{"a": 1,  "b": [1, 2]}', 100) == '{"a":1,"b":[1,2]}'
    cut = show_output("x" * 500, 100)
    assert cut.startswith("x" * 100) and "500 characters" in cut


def test_compact_tool_list_is_short():
    rt = runtime()
    text = render_tools([*rt.agent_tools.values(), *rt.user_tools.values()])
    assert len(text.splitlines()) == 43
    assert 'set_network_mode_preference(mode: "4g_5g_preferred"|"4g_only"|"3g_only"|"2g_only")' in text
    assert "get_bills_for_customer(customer_id: string, limit: integer = 12)" in text
    assert len(text) < 7000  # about 1.5k tokens, against 3-4k as JSON schemas
    # tau2 ships the schemas the customer's LLM gets
    schemas = EpisodeDevice(None).user_tools
    assert len(schemas) == 30 and all(schema["type"] == "function" for schema in schemas)


FRAGMENTS = [
    "{", "}", "[", "]", '"', ":", ",", " ", "\n", "```", "```json", "name", '"name"', '"arguments"',
    '"args"', '"parameters"', "null", "true", "1e999", "NaN", "-0", "check_status_bar", "toggle_airplane_mode",
    "get_customer_by_id", '"customer_id"', '"C1001"', "<interact>", "</interact>", "<answer>", "</answer>",
    "\\u0000", "\x00", "é", "😀", "\ud800",
]  # fmt: skip

texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["name", "arguments", "args", "x", "customer_id"]), inner, max_size=4)),
        max_leaves=12,
    ).map(lambda v: json.dumps(v, allow_nan=True)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_parser_never_raises(payload):
    for parse in (parse_tool_call, parse_message):
        result = parse(payload)
        assert isinstance(result, ParseResult)
        assert result.ok or isinstance(result.error, str)
    assert isinstance(looks_like_tool_call(payload), bool)
    assert isinstance(message_key(payload), str)


@pytest.mark.parametrize("value", [None, 3, b"x", ["a"], {"name": "x"}, "x" * (MAX_TEXT_CHARS + 1)])
def test_parser_on_non_text(value):
    assert not parse_tool_call(value).ok and not parse_message(value).ok


@pytest.fixture(scope="module")
def task(telecom):
    tasks, named = telecom
    return tasks[named["train"][0]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(texts.map(lambda t: f"<interact>{t}</interact>") | texts, min_size=1, max_size=6))
def test_solo_rounds_never_raise(task, turns):
    env = Tau2Env(task, "solo", settings=Tau2Settings(max_turns=len(turns)))
    for text in turns:
        step = asyncio.run(env.act(text))
        assert step.critique in (-1, 0, 1) and isinstance(step.feedback, str)
    env.answer(turns[-1])
    assert 0.0 <= env.reward() <= 1.0 and env.proxies()["turns"] == len(turns)


# ---- strict argument types ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, arguments, reason",
    [
        (
            "refuel_data",
            {"customer_id": "C1001", "line_id": "L1002", "gb_amount": True},
            "gb_amount must be a number, not a boolean (true)",
        ),
        (
            "refuel_data",
            {"customer_id": "C1001", "line_id": "L1002", "gb_amount": "2.0"},
            'gb_amount must be a number, not a string ("2.0")',
        ),
        (
            "refuel_data",
            {"customer_id": "C1001", "line_id": "L1002", "gb_amount": None},
            "gb_amount must be a number, not null",
        ),
        (
            "get_bills_for_customer",
            {"customer_id": "C1001", "limit": "3"},
            'limit must be an integer, not a string ("3")',
        ),
        (
            "get_bills_for_customer",
            {"customer_id": "C1001", "limit": 3.0},
            "limit must be an integer, not a number (3.0)",
        ),
        (
            "get_bills_for_customer",
            {"customer_id": "C1001", "limit": False},
            "limit must be an integer, not a boolean (false)",
        ),
        ("get_customer_by_id", {"customer_id": 1001}, "customer_id must be a string, not a number (1001)"),
        ("get_customer_by_id", {"customer_id": ["C1001"]}, "customer_id must be a string, not an array"),
        ("set_apn_settings", {"apn_settings": True}, "apn_settings must be a JSON object, not a boolean (true)"),
        (
            "grant_app_permission",
            {"app_name": "messaging", "permission": {"sms": True}},
            "permission must be a string, not an object",
        ),
    ],
)
def test_ill_typed_arguments_are_named(name, arguments, reason):
    spec = {**runtime().agent_tools, **runtime().user_tools}[name]
    assert type_problem(name, spec.model, arguments) == f"{name}: argument {reason}"


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2}),  # an integer is a number
        ("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.5}),
        ("get_bills_for_customer", {"customer_id": "C1001", "limit": 3}),
        ("set_network_mode_preference", {"mode": "4g_5g_preferred"}),
        ("set_apn_settings", {"apn_settings": {"apn_name": "internet"}}),
        ("check_status_bar", {}),
    ],
)
def test_well_typed_arguments_pass(name, arguments):
    spec = {**runtime().agent_tools, **runtime().user_tools}[name]
    assert type_problem(name, spec.model, arguments) is None


def test_type_problem_never_raises_on_odd_values():
    spec = runtime().agent_tools["refuel_data"]
    assert "JSON values" in type_problem("refuel_data", spec.model, {"gb_amount": float("nan")})
    assert "JSON values" in type_problem("refuel_data", spec.model, {"gb_amount": object()})
    assert type_problem("anything", None, {"x": object()}) is None


@pytest.mark.parametrize("gb_amount", [True, "2.0", "2", None, [2.0]])
def test_ill_typed_calls_are_invalid_and_never_reach_tau2(task_with_refuel, gb_amount):
    """README and docs/guides/tau2.md: ill-typed calls are rejected before they reach tau2 (critique -1)."""
    expected = next(a for a in task_with_refuel.evaluation_criteria.actions if a.name == "refuel_data")
    env = Tau2Env(task_with_refuel, "solo", settings=Tau2Settings(reward="official"))
    text = (
        "<interact>"
        + json.dumps({"name": "refuel_data", "arguments": {**expected.arguments, "gb_amount": gb_amount}})
        + "</interact>"
    )
    step = asyncio.run(env.act(text))
    assert step.critique == -1 and not step.valid and step.info["rule"] == "bad_arguments"
    assert "gb_amount must be a number" in step.feedback
    assert env.simulation_run().messages == [] and not any(env._matched)  # tau2 never saw it
    off = Tau2Env(task_with_refuel, "solo", settings=Tau2Settings(critique_invalid=False))
    assert asyncio.run(off.act(text)).critique == 0
    good = asyncio.run(env.act(text.replace(json.dumps(gb_amount), "2")))  # the same call with a number: +1
    assert good.valid and good.critique == 1 and good.info["new_actions"]


def test_the_customer_s_ill_typed_calls_are_device_errors(task):
    env = Tau2Env(
        task,
        "dual",
        customer=_Scripted(
            [
                ("set_network_mode_preference", {"mode": 4}),
                ("grant_app_permission", {"app_name": True, "permission": "sms"}),
            ]
        ),
    )
    asyncio.run(env.act("<interact>Hello!</interact>"))
    assert [r.error for r in env.customer.results] == [True, True]
    assert "mode must be a string" in env.customer.results[0].content
    assert not any(m.role == "user" and m.tool_calls for m in env.simulation_run().messages)


class _Scripted:
    """A customer that makes the given phone calls in its first reply."""

    def __init__(self, calls):
        self.calls, self.results = calls, []

    async def reply(self, message, device):
        from arew_tau2.customer import CustomerTurn

        self.results = [device.call(name, arguments) for name, arguments in self.calls]
        return CustomerTurn("Okay.", None, "offline")


@pytest.fixture(scope="module")
def task_with_refuel(telecom):
    tasks, named = telecom
    return next(
        tasks[i]
        for i in named["base"]
        if any(a.name == "refuel_data" for a in tasks[i].evaluation_criteria.actions or [])
    )
