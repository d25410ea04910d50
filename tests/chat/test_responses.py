"""OpenAI response parsing: text and tool calls read, and no body, however malformed, raises."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arew.chat import chat_completion_message, chat_completion_text
from arew.chat.responses import MAX_TEXT_CHARS
from parse_checks import check

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["choices", "message", "content", "x"]), inner, max_size=3),
    ),
    max_leaves=10,
)
TEXTS = st.one_of(st.text(max_size=200), st.sampled_from(["", "\ud800", "x" * (MAX_TEXT_CHARS + 1), "FACTS: 1"]))


def tool_reply(calls, content=None):
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": calls}, "finish_reason": "tool_calls"}]}


def call(name, arguments="{}", call_id="c1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_chat_completion_text_on_any_text(text):
    check(chat_completion_text(text))
    check(chat_completion_text({"choices": [{"message": {"content": text}}]}), lambda v: isinstance(v, str))


@settings(max_examples=300, deadline=None)
@given(JSONISH)
def test_chat_completion_text_on_any_json(obj):
    check(chat_completion_text(obj), lambda v: isinstance(v, str))


def test_chat_completion_message_parses_tool_calls():
    body = tool_reply([call("grant_app_permission", '{"app_name": "messaging", "permission": "sms"}'), call("x", "{oops", "c2"), call("y", "[1]", "c3"), "junk"])
    message = chat_completion_message(body).value
    assert message.text == "" and len(message.tool_calls) == 4
    good, broken, not_object, junk = message.tool_calls
    assert (good.id, good.name, good.arguments, good.ok) == ("c1", "grant_app_permission", {"app_name": "messaging", "permission": "sms"}, True)
    assert broken.arguments is None and "not valid JSON" in broken.error
    assert not_object.error == "the arguments are not a JSON object" and junk.id == "call_3" and not junk.ok
    assert chat_completion_message(tool_reply([call("t", "")])).value.tool_calls[0].arguments == {}
    assert not chat_completion_message(tool_reply(None)).ok  # neither text nor calls
    assert not chat_completion_message(tool_reply("not a list", "hi")).ok
    assert not chat_completion_text(tool_reply([call("t")])).ok  # unchanged for text-only callers


@settings(max_examples=200, deadline=None)
@given(obj=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20), lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(["choices", "message", "content", "tool_calls", "function", "name", "arguments", "id"]), c, max_size=4), max_leaves=30))
def test_chat_completion_message_never_raises(obj):
    chat_completion_message(obj)
    chat_completion_message({"choices": [{"message": obj}]})
    chat_completion_message(tool_reply([obj]))
