"""The tool-call parser and the compact tool list; no text may raise out of the parser or a round."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arew.envs.parsing import MAX_TEXT_CHARS, ParseResult
from arew.envs.tau2.env import EpisodeDevice, Tau2Env
from arew.envs.tau2.runtime import runtime
from arew.envs.tau2.settings import Tau2Settings
from arew.envs.tau2.tools import (
    ToolRequest,
    check_arguments,
    looks_like_tool_call,
    message_key,
    parse_message,
    parse_tool_call,
    render_tools,
    show_output,
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
