"""The dual-control customer of tau2 telecom: the LLM customer against a loopback OpenAI-style server
(tool calls, results sent back, stop tokens, bounds, malformed calls, fallbacks, the shared
semaphore) and the offline customer on tau2's real phone (the base tasks' expected user actions
done by a scripted agent, stops, determinism, fuzz)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("aiohttp")

from arew.serving.ray_service import free_port
from arew_tau2.customer import (
    CUSTOMER_DEFAULTS,
    CUSTOMER_OPTIONS,
    OUT_OF_SCOPE,
    STOP,
    STOP_TOKENS,
    TRANSFER,
    CustomerTurn,
    DeviceResult,
    LLMCustomer,
    LLMCustomerConfig,
    OfflineCustomer,
    check_customer_options,
    make_customer,
    prompts,
    split_stop,
)
from arew_tau2.customer.base import PROCESS_STATS
from arew_tau2.customer.llm import repeated_run
from arew_tau2.customer.offline import _matches
from arew_tau2.runtime import ToolCall, new_environment, runtime
from fakes import HOSTILE_REPLIES, HostileServer, completion, delay

# the share of base tasks whose expected user actions the offline customer performs for a scripted
# agent (measured: 114/114 with both phrasings); a floor, so that rule changes that lose tasks fail
MIN_SHARE = 0.95


# ---- devices -----------------------------------------------------------------------------------
class TelecomDevice:
    """tau2's phone for one task: device tools run as requestor "user"; the scripted agent's own tools as "assistant"."""

    def __init__(self, task):
        self.env = new_environment(task, solo=False)
        self.user_tools = [spec.schema for spec in runtime().user_tools.values()]
        self.calls: list[tuple[str, dict]] = []
        self._n = 0

    def call(self, name, arguments):
        self._n += 1
        result = self.env.get_response(ToolCall(id=f"u{self._n}", name=name, arguments=dict(arguments), requestor="user"))
        self.calls.append((name, dict(arguments)))
        return DeviceResult(result.content or "", bool(result.error))

    def agent(self, name, arguments):
        self._n += 1
        return self.env.get_response(ToolCall(id=f"a{self._n}", name=name, arguments=dict(arguments), requestor="assistant"))


class FakeDevice:
    """Records calls and answers each from ``outputs`` (or "ok: <name>")."""

    def __init__(self, outputs=None, tools=("toggle_airplane_mode", "grant_app_permission", "check_status_bar", "can_send_mms")):
        self.outputs = outputs or {}
        self.user_tools = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object", "properties": {}}}} for n in tools]
        self.calls: list[tuple[str, dict]] = []

    def call(self, name, arguments):
        self.calls.append((name, dict(arguments)))
        return DeviceResult(self.outputs.get(name, f"ok: {name}"), name == "broken")


class RaisingDevice(FakeDevice):
    def call(self, name, arguments):
        super().call(name, arguments)
        raise RuntimeError("the phone fell in the sink")


# ---- the scripted agent ------------------------------------------------------------------------
def described(name, arguments):
    """A request derived from the tool's description (its first sentence, verb in the imperative), never its name."""
    verb, _, rest = runtime().user_tools[name].summary.partition(" ")
    verb = verb.lower()[:-1] if verb.endswith("s") else verb.lower()
    text = f"Could you please {verb} {rest.rstrip('.').replace('ON or OFF', 'on or off')}?"
    for key, value in arguments.items():
        text += f" Use {str(value).replace('_', ' ')} for the {key.replace('_', ' ')}."
    return text


NATURAL = {
    "toggle_airplane_mode": "Can you switch flight mode on your phone?",
    "set_network_mode_preference": "Please change your preferred network type to {mode}.",
    "toggle_wifi_calling": "Could you flip the setting for making calls over Wi-Fi?",
    "reset_apn_settings": "Please restore the access point name settings to their defaults.",
    "reboot_device": "Could you power your phone off and back on?",
    "grant_app_permission": "Please allow the {app_name} app access to {permission}.",
    "toggle_data": "Could you switch your cellular data?",
    "reseat_sim_card": "Please take the SIM card out of the phone and put it back in.",
    "toggle_roaming": "Can you switch the roaming setting?",
    "toggle_data_saver_mode": "Please switch the data saver setting.",
    "disconnect_vpn": "Please turn off your VPN.",
    "make_payment": "Please pay the bill I just sent you.",
}


def natural(name, arguments):
    """A hand-written plain request with none of the tool's own words where avoidable."""
    values = {k: str(v).replace("4g_5g_preferred", "4G/5G").replace("_", " ") for k, v in arguments.items()}
    return NATURAL[name].format(**values)


def expected_user_actions(task):
    return [(a.name, dict(a.arguments), a.compare_args) for a in task.evaluation_criteria.actions if a.requestor == "user"]


async def play(task, phrase, customer=None):
    """Greet, then for each expected action in order: do it (the agent's) or ask for it (the customer's); then ask to check."""
    device = TelecomDevice(task)
    customer = customer or OfflineCustomer(task)
    turns = [await customer.reply("Hello, thank you for calling. How can I help you today?", device)]
    for action in task.evaluation_criteria.actions:
        if action.requestor == "assistant":
            if action.name == "transfer_to_human_agents":
                turns.append(await customer.reply("I am transferring you to a human agent now.", device))
            else:
                device.agent(action.name, action.arguments)
            continue
        turns.append(await customer.reply(phrase(action.name, action.arguments), device))
    if not any(t.stop for t in turns):
        turns.append(await customer.reply("Thanks. Could you check whether it works now?", device))
    done = all(any(_matches(e, n, args) for n, args in device.calls) for e in expected_user_actions(task))
    return done, turns, device


@pytest.mark.parametrize("phrase", [described, natural], ids=["described", "natural"])
async def test_scripted_agent_gets_the_expected_user_actions_done(base_tasks, phrase):
    done, stopped, transferred = 0, 0, 0
    for task in base_tasks:
        ok, turns, _ = await play(task, phrase)
        done += ok
        stopped += turns[-1].stop == STOP
        transferred += turns[-1].stop == TRANSFER
        assert all(isinstance(t, CustomerTurn) and t.source == "offline" for t in turns)
        assert all(t.stop is None for t in turns[:-1])  # the call ends once
    share = done / len(base_tasks)
    print(f"offline customer, {phrase.__name__} requests: {done}/{len(base_tasks)} = {share:.3f}; stop {stopped}, transfer {transferred}")
    assert share >= MIN_SHARE
    # every task either reaches its goal reading (STOP) or is one the agent must transfer
    assert stopped + transferred == len(base_tasks) and stopped >= 90


def mms_task(base_tasks):
    return next(t for t in base_tasks if t.id.startswith("[mms_issue]airplane_mode_on|bad_network_preference|bad_wifi_calling"))


async def test_offline_answers_identity_location_and_offers(base_tasks):
    task = mms_task(base_tasks)
    customer, device = OfflineCustomer(task), TelecomDevice(task)
    first = await customer.reply("Hi! Could I have your phone number, please?", device)
    assert first.text.startswith("Hi. I am unable to send MMS") and "555-123-2002" in first.text and first.stop is None
    assert "abroad in France" in (await customer.reply("Are you travelling abroad at the moment?", device)).text
    assert "2.0 GB" in (await customer.reply("Would you like me to refuel some data for you?", device)).text
    assert "rather not change" in (await customer.reply("Shall we change your plan to a bigger one?", device)).text
    assert (await customer.reply("Hmm.", device)).text == prompts.NEUTRAL
    assert device.calls == []  # none of that needed the phone


async def test_offline_reads_acts_by_direction_and_stops(base_tasks):
    task = mms_task(base_tasks)  # airplane mode on, mobile data off, roaming off
    customer, device = OfflineCustomer(task), TelecomDevice(task)
    await customer.reply("Hello", device)
    bar = await customer.reply("What does the status bar at the top of your screen show?", device)
    assert device.calls == [("check_status_bar", {})] and "Airplane Mode" in bar.text
    already = await customer.reply("Please turn airplane mode on.", device)  # it is on: look, do nothing
    assert device.calls[-1] == ("check_network_status", {}) and "already on" in already.text
    off = await customer.reply("Now please turn off airplane mode.", device)
    assert device.calls[-1] == ("toggle_airplane_mode", {}) and "Airplane Mode is now OFF" in off.text
    mixed = await customer.reply("Don't touch the wifi. Restart your phone and then tell me if you can send an MMS.", device)
    assert [c[0] for c in device.calls[-2:]] == ["reboot_device", "can_send_mms"] and "cannot send MMS" in mixed.text
    assert mixed.stop is None and "still isn't fixed" in mixed.text  # the goal reading failed
    claim = await customer.reply("That should be fixed now.", device)
    assert claim.stop is None and device.calls[-1] == ("can_send_mms", {})
    bye = await customer.reply("Sorry I couldn't help more. Goodbye!", device)
    assert bye.stop == STOP and STOP not in bye.text


async def test_offline_transfer_and_tool_step_bound(base_tasks):
    task = mms_task(base_tasks)
    device = TelecomDevice(task)
    bounded = OfflineCustomer(task, max_tool_steps=2)
    await bounded.reply("Hello", device)
    await bounded.reply("Check the status bar, the network status, the sim status, the wifi status and the apn settings.", device)
    assert len(device.calls) == 2
    turn = await OfflineCustomer(task).reply("Let me transfer you to a specialist on our technical team.", device)
    assert turn.stop == TRANSFER


async def test_offline_is_deterministic(base_tasks):
    task = mms_task(base_tasks)
    script = ["hi", "what's your name?", "toggle airplane mode", "check your status bar", "reseat the sim card", "5g please, change the network mode", "bye"]

    async def run():
        customer, device = OfflineCustomer(task), TelecomDevice(task)
        return [await customer.reply(m, device) for m in script], device.calls

    assert await run() == await run()


VOCABULARY = [
    "please", "could you", "toggle", "turn", "on", "off", "check", "what", "is", "don't", "airplane mode", "wifi",
    "wi-fi calling", "mobile data", "roaming", "data saver", "apn", "reset", "vpn", "disconnect", "sim card", "reseat",
    "restart", "reboot", "grant", "permission", "sms", "storage", "messaging app", "network mode", "5g", "3g only",
    "status bar", "speed test", "mms", "pay", "bill", "payment", "fixed", "try again", "goodbye", "transfer", "human",
    "phone number", "abroad", "refuel", "plan", ".", "?", ",", "\n", "set", "are", "set to",
]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(st.one_of(st.text(max_size=300), st.lists(st.sampled_from(VOCABULARY), max_size=25).map(" ".join)), min_size=1, max_size=6))
def test_offline_never_raises(base_tasks, messages):
    task = base_tasks[len(messages) % len(base_tasks)]
    customer = OfflineCustomer(task)
    for i, message in enumerate(messages):
        device = (FakeDevice(), RaisingDevice(), TelecomDevice(task))[i % 3]
        turn = customer.respond(message, device)
        assert isinstance(turn, CustomerTurn) and isinstance(turn.text, str) and turn.text
        assert turn.stop in STOP_TOKENS + (None,) and not any(token in turn.text for token in STOP_TOKENS)
        assert len(device.calls) <= customer.max_tool_steps


def test_a_switch_that_must_look_first_never_exceeds_the_tool_step_bound(base_tasks):
    """Turning something on or off takes a reading and then the switch: two calls for one intent (none fits in one)."""
    task = base_tasks[0]
    for bound in range(1, 6):
        device = TelecomDevice(task)
        customer = OfflineCustomer(task, max_tool_steps=bound)
        customer.respond("Please turn on wifi, turn off airplane mode, turn on mobile data and turn on roaming.", device)
        assert len(device.calls) <= bound and (len(device.calls) > 0) == (bound > 1)
        assert all(name.startswith("check_") for name, _ in device.calls[::2])  # each switch looked first


@settings(max_examples=60, deadline=None)
@given(message=st.one_of(st.none(), st.integers(), st.text(min_size=1, max_size=40).map(lambda s: s * (6000 // len(s)))))
def test_offline_takes_any_object(message):
    turn = OfflineCustomer(object()).respond(message, FakeDevice())
    assert isinstance(turn.text, str)


# ---- stop tokens and tool-call replies -----------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("All good now, thanks! ###STOP###", ("All good now, thanks!", STOP)),
        ("###TRANSFER###", ("", TRANSFER)),
        ("I can't go on. ###OUT-OF-SCOPE### bye ###STOP###", ("I can't go on. bye", OUT_OF_SCOPE)),
        ("  no token here ", ("no token here", None)),
        (None, ("", None)),
    ],
)
def test_split_stop(text, expected):
    assert split_stop(text) == expected


def tool_reply(calls, content=None):
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": calls}, "finish_reason": "tool_calls"}]}


def call(name, arguments="{}", call_id="c1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ---- the LLM customer against a loopback server ------------------------------------------------
def llm(task, url, **kw):
    kw.setdefault("backoff", 0.0)
    kw.setdefault("timeout", 2.0)
    return LLMCustomer(task, LLMCustomerConfig(url=url, **kw))


async def test_tool_calls_run_on_the_device_and_go_back_in_openai_format(serve, base_tasks):
    script = [
        tool_reply([call("toggle_airplane_mode")], content="let me look"),
        tool_reply([call("grant_app_permission", '{"app_name": "messaging", "permission": "sms"}', "c2")]),
        "Done, it works now! ###STOP###",
        "Hello again.",
    ]
    server, url = await serve(lambda n, body: script[n])
    task = mms_task(base_tasks)
    customer = llm(task, url, model="cust-14b", max_tokens=99)
    device = FakeDevice({"toggle_airplane_mode": "Airplane Mode is now OFF."})
    turn = await customer.reply("Please turn off airplane mode and grant the SMS permission.", device)
    assert turn == CustomerTurn("Done, it works now!", STOP, "llm")
    assert device.calls == [("toggle_airplane_mode", {}), ("grant_app_permission", {"app_name": "messaging", "permission": "sms"})]
    first, second, third = server.bodies[:3]
    assert first["model"] == "cust-14b" and first["temperature"] == 0.0 and first["max_tokens"] == 99
    assert first["tools"] == device.user_tools and first["tool_choice"] == "auto"
    system, agent = first["messages"]
    assert system["role"] == "system" and "###STOP###" in system["content"] and "<scenario>" in system["content"]
    assert "John Smith" in system["content"] and "unable to send MMS" in system["content"]  # tau2's user scenario
    assert agent == {"role": "user", "content": "Please turn off airplane mode and grant the SMS permission."}  # roles flipped
    assert second["messages"][2:] == [
        {"role": "assistant", "content": "let me look", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "toggle_airplane_mode", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Airplane Mode is now OFF."},
    ]
    assert third["messages"][-1] == {"role": "tool", "tool_call_id": "c2", "content": "ok: grant_app_permission"}
    await customer.reply("Anything else?", device)
    assert server.bodies[3]["messages"][-2:] == [
        {"role": "assistant", "content": "Done, it works now! ###STOP###"},
        {"role": "user", "content": "Anything else?"},
    ]
    stats = customer.stats
    assert (stats.calls, stats.requests, stats.tool_calls, stats.fallbacks, stats.tool_errors) == (2, 4, 2, 0, 0)
    # the offline customer kept in step: it knows the turn was had and the permission was granted
    assert customer.offline.turns == 2 and ("grant_app_permission", {"app_name": "messaging", "permission": "sms"}) in customer.offline.performed


async def test_malformed_and_unknown_tool_calls_are_device_errors(serve, base_tasks):
    script = [tool_reply([call("grant_app_permission", '{"app_name": mess', "c1"), call("teleport", "{}", "c2")]), "Sorry, which app?"]
    server, url = await serve(lambda n, body: script[n])
    customer, device = llm(mms_task(base_tasks), url), FakeDevice()
    turn = await customer.reply("Grant the permission.", device)
    assert turn == CustomerTurn("Sorry, which app?", None, "llm") and device.calls == []
    sent = server.bodies[1]["messages"]
    assert sent[-3]["tool_calls"][0]["function"]["arguments"] == "{}"  # re-encoded, never the broken string
    assert sent[-2]["role"] == "tool" and sent[-2]["content"].startswith("Error: the arguments are not valid JSON")
    assert sent[-1]["content"] == "Error: the phone has no tool named 'teleport'"
    assert customer.stats.tool_errors == 2 and customer.stats.fallbacks == 0


async def test_tool_step_bound_falls_back(serve, base_tasks):
    server, url = await serve(lambda n, body: tool_reply([call("check_status_bar", "{}", f"c{n}")]))
    task = mms_task(base_tasks)
    customer, device = llm(task, url, max_tool_steps=3), TelecomDevice(task)
    turn = await customer.reply("Hello, what is the problem?", device)
    assert turn.source == "fallback" and "customer_max_tool_steps=3" in turn.error
    assert turn.text.startswith("Hi. I am unable to send MMS")  # the offline customer's first reply
    assert device.calls == [("check_status_bar", {})] * 3 and len(server.bodies) == 4
    assert (customer.stats.tool_step_limits, customer.stats.fallbacks) == (1, 1)
    assert customer.history[-1]["role"] == "assistant" and customer.history[-2]["role"] == "tool"


async def test_fallback_does_not_repeat_what_the_llm_did(serve, base_tasks):
    script = [tool_reply([call("toggle_airplane_mode")]), 500]
    server, url = await serve(lambda n, body: script[min(n, 1)])
    task = mms_task(base_tasks)
    customer, device = llm(task, url, max_retries=0), TelecomDevice(task)
    turn = await customer.reply("Please toggle airplane mode.", device)
    assert turn.source == "fallback" and "HTTP 500" in turn.error
    assert device.calls == [("toggle_airplane_mode", {})]  # toggled once, by the LLM; the offline reply reports it
    assert "Airplane Mode is now OFF" in turn.text


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("", "empty"),
        ('<tool_call>{"name": "toggle_data", "arguments": {}}</tool_call>', "tool call as text"),
        ({"choices": []}, "malformed response"),
        (400, "HTTP 400"),
    ],
)
async def test_unusable_replies_fall_back(serve, base_tasks, reply, reason):
    server, url = await serve(lambda n, body: reply)
    customer = llm(mms_task(base_tasks), url)
    turn = await customer.reply("Hi there", FakeDevice())
    assert turn.source == "fallback" and reason in turn.error and turn.text.startswith("Hi. I am unable")
    assert customer.stats.fallbacks == 1 and customer.stats.parse_failures + customer.stats.http_errors == 1


# SmolLM2-135M-Instruct as the customer, real (benchmarks/user_parse_rates.py): it loops until max_tokens
LOOP = "I'm sorry for any misunderstanding. " + "I'm unable to send messages using my messaging app. " * 6 + "I'm unab"


def test_repeated_run_counts_the_most_frequent_run_of_words():
    assert repeated_run(LOOP) >= 6
    assert repeated_run("I am currently in France now. I am currently in France now.") == 2
    assert repeated_run("No, I'm at home in the US; my number is 555-123-2002.") == 1
    assert repeated_run("too short") == 0 and repeated_run(None) == 0 and repeated_run("") == 0
    assert repeated_run("Okay. " * 3 + "Done.") == 0  # fewer than LOOP_WORDS words


@pytest.mark.parametrize(
    "text, finish_reason, source",
    [
        (LOOP, "length", "fallback"),  # a loop the cap cut: no message
        (LOOP, "stop", "llm"),  # the model ended it itself: a (repetitive) message
        ("I am currently in France. " + "My phone shows no bars at all, which is strange, since I was told roaming works. " * 2, "length", "llm"),
        ("No, I'm at home. Yes, it says 4G.", "length", "llm"),  # a yes/no with an explanation, cut: still a message
    ],
)
async def test_a_loop_cut_by_the_length_cap_falls_back(serve, base_tasks, text, finish_reason, source):
    server, url = await serve(lambda n, body: completion(text, finish_reason))
    customer = llm(mms_task(base_tasks), url, max_tokens=64)
    turn = await customer.reply("Are you abroad?", FakeDevice())
    assert turn.source == source and len(server.bodies) == 1
    if source == "fallback":
        assert "repeats itself" in turn.error and "customer_max_tokens=64" in turn.error
        assert (customer.stats.parse_failures, customer.stats.fallbacks) == (1, 1)
        assert customer.history[-1]["content"] != text  # the loop does not join the conversation
    else:
        assert customer.stats.parse_failures == customer.stats.fallbacks == 0


async def test_server_down_falls_back_and_counts(base_tasks, caplog):
    before = PROCESS_STATS.fallbacks
    customer = llm(mms_task(base_tasks), f"http://127.0.0.1:{free_port()}/v1", max_retries=1)
    turn = await customer.reply("What's your phone number?", FakeDevice())
    assert turn.source == "fallback" and "555-123-2002" in turn.text and "attempts failed" in turn.error
    assert customer.stats.connection_errors == 2 and customer.stats.retries == 1 and customer.stats.fallbacks == 1
    assert PROCESS_STATS.fallbacks == before + 1
    repeat = llm(mms_task(base_tasks), f"http://127.0.0.1:{free_port()}/v1", max_retries=0, fallback="repeat")
    assert (await repeat.reply("Hi", FakeDevice())).text == prompts.REPEAT


@pytest.mark.parametrize("reply", HOSTILE_REPLIES)
async def test_a_hostile_server_costs_one_counted_fallback_or_is_read(base_tasks, reply):
    """The fault probe's server replies (tests/chat/test_hostile_servers.py runs the other clients on them)."""
    async with HostileServer(reply, "Thanks, it works now.") as url:
        customer = llm(mms_task(base_tasks), url, timeout=1.0, max_retries=0)
        turn = await customer.reply("Please turn airplane mode off.", FakeDevice())
    stats = customer.stats
    failures = stats.timeouts + stats.connection_errors + stats.http_errors + stats.parse_failures
    if HOSTILE_REPLIES[reply][1]:
        assert (turn.source, turn.text.replace(" \ufffd", ""), failures) == ("llm", "Thanks, it works now.", 0)
    else:
        assert (turn.source, failures, stats.fallbacks) == ("fallback", 1, 1)


async def test_shared_semaphore_bounds_requests_in_flight(serve, base_tasks):
    server, url = await serve(lambda n, body: delay(0.05, "Okay."))
    customers = [llm(base_tasks[i], url, concurrency=2) for i in range(6)]
    turns = await asyncio.gather(*(c.reply("Hello", FakeDevice()) for c in customers))
    assert all(t.source == "llm" for t in turns) and server.max_in_flight == 2


# ---- options -----------------------------------------------------------------------------------
def test_options_and_make_customer(base_tasks):
    task = base_tasks[0]
    for key in ("customer", "customer_url", "customer_model", "customer_timeout", "customer_max_retries", "customer_concurrency",
                "customer_temperature", "customer_max_tokens", "customer_max_tool_steps", "customer_fallback"):  # fmt: skip
        assert key in CUSTOMER_OPTIONS
    assert CUSTOMER_DEFAULTS["customer"] == "offline" and CUSTOMER_DEFAULTS["customer_temperature"] == 0.0
    assert isinstance(make_customer(task), OfflineCustomer)
    customer = make_customer(task, customer="llm", customer_url="http://h:1/v1", customer_timeout=5, customer_max_tool_steps=3)
    assert isinstance(customer, LLMCustomer) and customer.config.timeout == 5.0 and customer.offline.max_tool_steps == 3
    with pytest.raises(TypeError, match="customer_urll"):
        make_customer(task, customer_urll="x")
    check_customer_options({**CUSTOMER_DEFAULTS, "reward": "official"}, "arew_agent.env_options")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"customer": "human"}, "arew_agent.env_options.customer: must be one of"),
        ({"customer_timeout": 0}, "arew_agent.env_options.customer_timeout: must be > 0, got 0"),
        ({"customer_timeout": "slow"}, "arew_agent.env_options.customer_timeout: expected a finite number, got 'slow'"),
        ({"customer_max_tool_steps": 0}, "arew_agent.env_options.customer_max_tool_steps: must be >= 1, got 0"),
        ({"customer_fallback": "unknown"}, "arew_agent.env_options.customer_fallback: must be one of"),
        ({"customer_url": "ftp://x"}, "arew_agent.env_options.customer_url: must be an http"),
        ({"customer_temperature": float("nan")}, "arew_agent.env_options.customer_temperature: expected a finite number, got nan"),
    ],
)
def test_invalid_options_name_their_key(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        check_customer_options(options, "arew_agent.env_options")
