"""The chat client against a loopback server (a reply of tool calls is a reply only when the request offered
tools), and the package's independence of the tasks."""

import subprocess
import sys

import pytest

from arew.chat import ChatCompletionClient, ClientConfig, RequestFailed

TOOL_CALL_REPLY = {
    "choices": [
        {
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "toggle_data", "arguments": '{"on": true}'}}],
            },
            "finish_reason": "tool_calls",
        }
    ]
}


async def test_client_accepts_tool_calls_only_when_the_request_offers_tools(serve):
    server, url = await serve(lambda n, body: TOOL_CALL_REPLY)
    client = ChatCompletionClient(ClientConfig(url=url, model="m", timeout=2.0, max_retries=0))
    tools = [{"type": "function", "function": {"name": "toggle_data", "parameters": {"type": "object", "properties": {}}}}]
    reply = await client.complete([{"role": "user", "content": "hi"}], tools=tools, tool_choice="auto", temperature=0.0)
    assert reply.text == "" and reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("c1", "toggle_data", {"on": True})]
    assert server.bodies[0]["tools"] == tools and server.bodies[0]["tool_choice"] == "auto"
    with pytest.raises(RequestFailed, match="no message content"):  # text callers: still a parse failure
        await client.complete([{"role": "user", "content": "hi"}])
    with pytest.raises(RequestFailed, match="no message content"):  # an empty tools list is no offer
        await client.complete([{"role": "user", "content": "hi"}], tools=[])


def test_the_chat_package_imports_nothing_of_the_tasks_verl_or_ray():
    code = (
        "import sys, arew.chat;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'verl', 'ray'} or m.startswith('arew.envs'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


async def test_a_lone_surrogate_in_a_reply_becomes_a_replacement_character_and_the_text_writes_as_utf8(serve, tmp_path):
    # JSON may escape half of a surrogate pair; decoded, it is a code point no UTF-8 writer accepts
    body = b'{"choices": [{"message": {"role": "assistant", "content": "CRITIQUE: +1 \\ud800 ok \\ud83d\\ude00"}, "finish_reason": "stop"}]}'
    server, url = await serve(lambda n, request: body)
    client = ChatCompletionClient(ClientConfig(url=url, model="m", timeout=2.0, max_retries=0))
    reply = await client.complete([{"role": "user", "content": "hi"}])
    assert reply.text == "CRITIQUE: +1 \ufffd ok \U0001f600"  # the valid pair is one character, kept
    reply.text.encode("utf-8")


async def test_a_reply_nested_deeper_than_the_stack_is_a_parse_failure_not_a_crash(serve):
    server, url = await serve(lambda n, request: b"[" * 100_000 + b"]" * 100_000)
    client = ChatCompletionClient(ClientConfig(url=url, model="m", timeout=2.0, max_retries=0))
    with pytest.raises(RequestFailed):
        await client.complete([{"role": "user", "content": "hi"}])
