"""The LLM user against a real HTTP server on 127.0.0.1 (aiohttp, in-process): scripted, malformed,
slow and failing answers, refused connections; retries, fallbacks and counters; whole episodes."""

import asyncio
import json
import math
import time

import pytest
from aiohttp import web

from arew.envs.users import PROCESS_STATS, FactRequest, LLMUser, LLMUserConfig, OfflineUser, RowRequest, make_user
from arew.envs.users.prompts import messages
from arew.serving.ray_service import free_port
from arew_flodial import FloDialEnv
from arew_mediq import MediQEnv
from fakes import completion, delay

FACTS = ("Patient is a 30-year-old woman.", "She has had a fever for three days.", "She smokes one pack a day.")
FACT_REQUEST = FactRequest("Do you have a fever?", FACTS, (1, 2), 2)
ROW_REQUEST = RowRequest("Is the fan spinning?", ("Is the fan spinning?", "Is the vent blocked?"), "Hot laptop.")


def user(url, **kw):
    kw.setdefault("backoff", 0.0)
    kw.setdefault("timeout", 2.0)
    return LLMUser(LLMUserConfig(url=url, **kw))


async def test_scripted_answers_and_request_shape(serve):
    server, url = await serve(lambda n, body: ["FACTS: 2", "facts: 3, 2.", "FACTS: NONE", "ROW: 1", "ROW: none"][n])
    u = user(url, model="m-14b", max_tokens=16)
    assert (await u.reply(FACT_REQUEST)).ids == (1,)
    assert (await u.reply(FACT_REQUEST)).ids == (2, 1)
    none = await u.reply(FACT_REQUEST)
    assert none.ids == () and none.unknown and none.source == "llm"
    assert (await u.reply(ROW_REQUEST)).ids == (0,)
    assert (await u.reply(ROW_REQUEST)).ids == ()
    body = server.bodies[0]
    assert body["model"] == "m-14b" and body["temperature"] == 0.0 and body["max_tokens"] == 16
    assert body["messages"] == messages(FACT_REQUEST)
    prompt = body["messages"][1]["content"]
    assert "2. She has had a fever" in prompt and "1. Patient is" not in prompt  # only open facts are offered
    assert "FACTS: NONE" in body["messages"][0]["content"]
    assert "ROW: NONE" in server.bodies[3]["messages"][0]["content"]
    assert prompt.endswith("Reply with one line: FACTS: <fact numbers> or FACTS: NONE")  # the format, restated last
    assert server.bodies[3]["messages"][1]["content"].endswith("Reply with one line: ROW: <row number> or ROW: NONE")
    assert u.stats.calls == 5 and u.stats.requests == 5 and u.stats.fallbacks == 0 and u.stats.retries == 0


@pytest.mark.parametrize(
    "reply",
    [
        "Sure! FACTS: 2",
        "FACTS: 2\nFACTS: 3",  # two different answers
        "FACTS: 2 or 3",
        "2. She has a fever.",  # a numbered line that does not quote the fact
        "FACTS: 1",  # not offered (already revealed)
        "FACTS: 9",
        "FACTS: 2, 3, 2",
        "FACTS:",
        "ROW: 1",
        "",
        b"not json",
        {"choices": []},
        {"error": "x"},
        [1, 2],
    ],
)
async def test_malformed_answers_fall_back_without_retry(serve, reply):
    server, url = await serve(lambda n, body: reply)
    u = user(url, max_retries=3)
    before = PROCESS_STATS.fallbacks
    out = await u.reply(FACT_REQUEST)
    assert out.source == "fallback" and out.ids == (1,) and out.error  # the offline answer: the fever fact
    assert (u.stats.parse_failures, u.stats.fallbacks, u.stats.retries, len(server.bodies)) == (1, 1, 0, 1)
    assert PROCESS_STATS.fallbacks == before + 1


@pytest.mark.parametrize(
    "reply, request_, ids",
    [
        ("FACTS: 2\nbecause the fever", FACT_REQUEST, (1,)),  # was a parse failure before explanations were read
        ("FACTS: 2 - she has had a fever for three days", FACT_REQUEST, (1,)),
        ("FACTS: 3, 2. Both are about her.", FACT_REQUEST, (2, 1)),
        ("2. She has had a fever for three days.", FACT_REQUEST, (1,)),  # the fact quoted under its number
        ("2. She has had a fever for three days.\n3. She smokes one pack a day.", FACT_REQUEST, (1, 2)),
        ("Yes, ROW: 1", ROW_REQUEST, (0,)),
        ("ROW: 2\nNo, the vent is clear.", ROW_REQUEST, (1,)),
        ("1. Is the fan spinning?", ROW_REQUEST, (0,)),
        (completion("FACTS: 2 - she has had a fev", "length"), FACT_REQUEST, (1,)),  # cut in the explanation
    ],
)
async def test_unambiguous_real_model_forms_are_read(serve, reply, request_, ids):
    _, url = await serve(lambda n, body: reply)
    u = user(url)
    out = await u.reply(request_)
    assert (out.source, out.ids, out.error) == ("llm", ids, None)
    assert u.stats.parse_failures == 0 and u.stats.fallbacks == 0


@pytest.mark.parametrize(
    "text",
    ["FACTS: 2, 3", "2. She has had a fever for three days.\n3. She smokes one pack a day."],
)
async def test_an_answer_the_length_cap_may_have_cut_falls_back(serve, text):
    _, url = await serve(lambda n, body: completion(text, "length"))
    u = user(url)
    out = await u.reply(FACT_REQUEST)
    assert out.source == "fallback" and "cut off" in out.error and u.stats.parse_failures == 1
    _, url = await serve(lambda n, body: completion(text, "stop"))
    assert (await user(url).reply(FACT_REQUEST)).source == "llm"  # the same text, ended by the model


async def test_too_many_facts_is_a_parse_failure(serve):
    _, url = await serve(lambda n, body: "FACTS: 2, 3")
    out = await user(url).reply(FactRequest("q?", FACTS, (0, 1, 2), max_facts=1))
    assert out.source == "fallback"


async def test_fallback_unknown_option(serve):
    _, url = await serve(lambda n, body: "garbage")
    out = await user(url, fallback="unknown").reply(FACT_REQUEST)
    assert out.source == "fallback" and out.ids == ()


async def test_slow_server_times_out_retries_then_falls_back(serve):
    server, url = await serve(lambda n, body: delay(0.5, "FACTS: 2"))
    u = user(url, timeout=0.15, max_retries=2)
    out = await u.reply(FACT_REQUEST)
    assert out.source == "fallback" and "timed out" in out.error and out.ids == (1,)
    assert (u.stats.timeouts, u.stats.retries, u.stats.requests, u.stats.fallbacks) == (3, 2, 3, 1)


async def test_slow_first_answer_then_fast_recovers_by_retry(serve):
    server, url = await serve(lambda n, body: delay(0.5, "FACTS: 3") if n == 0 else "FACTS: 3")
    u = user(url, timeout=0.15, max_retries=1)
    out = await u.reply(FACT_REQUEST)
    assert (
        out.source == "llm" and out.ids == (2,) and (u.stats.timeouts, u.stats.retries, u.stats.fallbacks) == (1, 1, 0)
    )


async def test_refused_connection_retries_then_falls_back():
    u = user(f"http://127.0.0.1:{free_port()}/v1", max_retries=2, backoff=0.01)
    out = await u.reply(ROW_REQUEST)
    assert out.source == "fallback" and "connection failed" in out.error and out.ids == (0,)
    assert (u.stats.connection_errors, u.stats.retries, u.stats.requests, u.stats.fallbacks) == (3, 2, 3, 1)


async def test_http_500_is_retried_and_can_recover(serve):
    server, url = await serve(lambda n, body: 500 if n < 2 else "ROW: 2")
    u = user(url, max_retries=2)
    out = await u.reply(ROW_REQUEST)
    assert (
        out.source == "llm"
        and out.ids == (1,)
        and (u.stats.http_errors, u.stats.retries, u.stats.fallbacks) == (2, 2, 0)
    )


async def test_http_500_forever_and_400_fall_back(serve):
    _, url = await serve(lambda n, body: 503)
    u = user(url, max_retries=1)
    assert (await u.reply(ROW_REQUEST)).source == "fallback" and (u.stats.http_errors, u.stats.retries) == (2, 1)
    server, url = await serve(lambda n, body: 400)
    u = user(url, max_retries=3)
    out = await u.reply(ROW_REQUEST)
    assert out.source == "fallback" and "HTTP 400" in out.error and u.stats.retries == 0 and len(server.bodies) == 1


async def test_shared_semaphore_bounds_requests_in_flight(serve):
    server, url = await serve(lambda n, body: delay(0.05, "FACTS: 2"))
    users = [user(url, concurrency=2) for _ in range(8)]  # separate users, one endpoint: one shared limit
    replies = await asyncio.gather(*(u.reply(FACT_REQUEST) for u in users))
    assert all(r.source == "llm" for r in replies) and server.max_in_flight == 2


async def test_no_request_when_nothing_can_be_named(serve):
    server, url = await serve(lambda n, body: "FACTS: 1")
    out = await user(url).reply(FactRequest("q?", FACTS, (), 2))
    assert out.ids == () and server.bodies == []


def test_config_validation_and_make_user_options():
    u = make_user(user="llm", user_url="http://h:1/v1/chat/completions", user_max_retries=0, user_backoff=1)
    assert isinstance(u, LLMUser) and u.config.endpoint == "http://h:1/v1/chat/completions"
    assert u.config.backoff == 1.0 and u.config.max_retries == 0
    assert make_user(user="llm").config.endpoint == "http://127.0.0.1:8000/v1/chat/completions"
    assert isinstance(make_user(user="offline", user_url="http://h/v1"), OfflineUser)
    for bad in ({"user_fallback": "maybe"}, {"user_timeout": 0}, {"user_url": "ftp://x"}, {"user_concurrency": 0}):
        with pytest.raises(ValueError):
            make_user(user="llm", **bad)
    with pytest.raises(TypeError):
        make_user(user="llm", user_temprature=0.5)


def episode_script(n, body):
    """Every failure mode in turn, then good answers; MediQ and FloDial requests are told apart by the label."""
    system = body["messages"][0]["content"]
    label = "FACTS" if "FACTS" in system else "ROW"
    return [delay(0.5, f"{label}: 1"), 500, "I think it is row 2", b"{", f"{label}: 2"][n % 5]


async def test_whole_episodes_survive_a_flaky_server(serve):
    server, url = await serve(episode_script)
    options = dict(user="llm", user_url=url, user_timeout=0.2, user_max_retries=1, user_backoff=0.0)
    mediq = MediQEnv.from_row(
        {
            "initial_info": "A 30-year-old woman.",
            "question": "Diagnosis?",
            "options": ["a", "b", "c", "d"],
            "answer_idx": 1,
            "facts": list(FACTS),
            "known_fact_ids": [0],
            "max_turns": 4,
        },
        0,
        **options,
    )
    flodial = FloDialEnv.from_row(
        {
            "problem": "Hot laptop.",
            "candidates": ["a", "b", "c", "d", "e"],
            "gold_idx": 0,
            "table_questions": list(ROW_REQUEST.rows),
            "table_answers": ["Yes", "No"],
            "max_turns": 4,
        },
        0,
        **options,
    )
    for env, n in ((mediq, 4), (flodial, 5)):
        for _turn in range(env.max_turns):
            step = await env.act("<interact>Do you have a fever or is the fan spinning?</interact>")
            assert step.valid and step.info["user_source"] in ("llm", "fallback", "none")
            env.update("<interact>" + ", ".join(["0.2"] * n) + "</interact>")
        assert env.answer("<answer>" + ", ".join(["0.2"] * (n - 1) + ["0.3"]) + "</answer>").done
        p = env.proxies()
        assert p["user_calls"] >= 1 and p["user_fallbacks"] >= 1 and p["user_requests"] >= p["user_calls"]
        assert p["user_timeouts"] + p["user_http_errors"] + p["user_parse_failures"] >= 1
        assert all(isinstance(v, float) for k, v in p.items() if k not in ("as", "bt"))
    json.dumps(mediq.proxies())


@pytest.mark.parametrize(
    "bad, key",
    [({"user_timeout": math.nan}, "user_timeout"), ({"user_timeout": math.inf}, "user_timeout"),
     ({"user_backoff": math.inf}, "user_backoff"), ({"user_timeout": "abc"}, "user_timeout"),
     ({"user_max_response_bytes": 0}, "user_max_response_bytes"), ({"user_temperature": -1}, "user_temperature")],
)  # fmt: skip
def test_non_finite_or_unparseable_settings_fail_naming_the_option(bad, key):
    with pytest.raises(ValueError, match=f"^{key}: "):
        make_user(user="llm", **bad)


@pytest.mark.parametrize("declared", [True, False])
async def test_oversized_reply_is_abandoned_while_read(serve, declared):
    """A 5 MB body against a 64 KB cap: one failed attempt, no retry, the offline answer."""
    huge = json.dumps(completion("FACTS: 2" + " " * 5_000_000)).encode()
    if declared:
        server, url = await serve(lambda n, body: huge)
    else:  # chunked, no Content-Length: the cap must hold while streaming

        async def stream(request):
            await request.json()
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for start in range(0, len(huge), 65536):
                await response.write(huge[start : start + 65536])
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_post("/v1/chat/completions", stream)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
    u = user(url, max_retries=2)
    out = await u.reply(FACT_REQUEST)
    assert out.source == "fallback" and "user_max_response_bytes=65536" in out.error
    assert (u.stats.requests, u.stats.retries, u.stats.http_errors) == (1, 0, 1)
    if not declared:
        await runner.cleanup()


async def test_dead_server_costs_one_wave_of_attempts_not_every_attempt():
    """64 episodes x 3 questions against a refused port: the breaker stops the attempts after the first wave."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    users = [user(url, max_retries=2, concurrency=64, breaker_failures=5, breaker_cooldown=60) for _ in range(64)]

    async def episode(u):
        return [await u.reply(ROW_REQUEST) for _ in range(3)]

    replies = await asyncio.gather(*(episode(u) for u in users))
    assert all(r.source == "fallback" for rs in replies for r in rs)
    requests = sum(u.stats.requests for u in users)
    assert requests <= 64 + 5  # without the breaker: 64 * 3 * 3 = 576
    assert sum(u.stats.short_circuits for u in users) > 0
    assert "circuit open" in replies[-1][-1].error


@pytest.fixture
async def hung_url():
    """A server that accepts connections and reads requests but never answers."""
    connections = []

    async def swallow(reader, writer):
        connections.append(writer)
        await reader.read()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    for writer in connections:
        writer.close()
    server.close()


async def test_hung_server_is_bounded_by_the_timeout(hung_url):
    timeout = 1.0
    users = [user(hung_url, timeout=timeout, max_retries=2, breaker_failures=3, breaker_cooldown=60) for _ in range(16)]
    started = time.monotonic()
    first = await asyncio.gather(*(u.reply(ROW_REQUEST) for u in users))
    second = await asyncio.gather(*(u.reply(ROW_REQUEST) for u in users))
    elapsed = time.monotonic() - started
    assert all(r.source == "fallback" for r in first + second)
    # one wave of timeouts (the retries find the circuit open); without the breaker 3 waves per reply: 6 s
    assert elapsed < 2.5 * timeout
    assert all(r.error.startswith("circuit open") for r in second)
    assert sum(u.stats.timeouts for u in users) == 16


async def test_probe_after_cooldown_closes_the_breaker(serve):
    server, url = await serve(lambda n, body: 503 if n < 3 else "ROW: 1")
    u = user(url, max_retries=0, breaker_failures=3, breaker_cooldown=0.2)
    assert [(await u.reply(ROW_REQUEST)).source for _ in range(4)] == ["fallback"] * 4
    assert len(server.bodies) == 3 and u.stats.short_circuits == 1  # the fourth never reached the server
    await asyncio.sleep(0.25)
    assert (await u.reply(ROW_REQUEST)).source == "llm"  # the probe succeeds
    assert (await u.reply(ROW_REQUEST)).source == "llm" and len(server.bodies) == 5


async def test_waiting_for_a_slot_counts_against_the_timeout(hung_url):
    timeout = 1.0
    users = [user(hung_url, timeout=timeout, max_retries=0, concurrency=1, breaker_failures=100) for _ in range(2)]
    started = time.monotonic()
    replies = await asyncio.gather(*(u.reply(ROW_REQUEST) for u in users))
    # both give up after one timeout: the second spent it waiting for the slot (not waiting, then a full timeout)
    assert time.monotonic() - started < 1.8 * timeout
    assert sorted(r.error.split(", last: ")[-1][:18] for r in replies) == ["no free request sl", "timed out after 1 "]


def test_breaker_settings_are_checked():
    for bad in ({"user_breaker_failures": 0}, {"user_breaker_cooldown": math.nan}):
        with pytest.raises(ValueError, match="^user_breaker"):
            make_user(user="llm", **bad)


class Replica:
    """One of several loopback servers behind one comma-separated ``user_url``: answers "FACTS: 2",
    or holds requests while ``hold`` is set; :meth:`kill` drops every connection and stops listening,
    as a killed server does. ``gauge`` counts the requests in flight over all replicas."""

    def __init__(self, gauge):
        self.gauge, self.served, self.held, self.transports, self.hold = gauge, 0, [], set(), False
        self.killed = asyncio.Event()

    async def handle(self, request):
        self.transports.add(request.transport)
        self.gauge["now"] += 1
        self.gauge["max"] = max(self.gauge["max"], self.gauge["now"])
        try:
            if self.hold:
                self.held.append(request)
                await self.killed.wait()
            await asyncio.sleep(self.gauge.get("delay", 0))
            self.served += 1
            return web.json_response(completion("FACTS: 2"))
        finally:
            self.gauge["now"] -= 1

    async def start(self):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        self.site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await self.site.start()
        self.url = f"http://127.0.0.1:{self.site._server.sockets[0].getsockname()[1]}/v1"
        return self

    async def kill(self):
        self.site._server.close()  # no new connections (refused) ...
        for transport in self.transports:  # ... and the open ones reset, requests in flight included
            transport.abort()
        self.killed.set()  # the held handlers end (their connections are gone)


@pytest.fixture
async def replicas():
    gauge = {"now": 0, "max": 0}
    started = [await Replica(gauge).start() for _ in range(2)]
    yield started
    for replica in started:
        await replica.kill()
        await replica.runner.cleanup()


async def test_replicas_share_the_requests_and_a_killed_one_fails_over(replicas):
    from arew.chat.client import shared_breaker

    a, b = replicas
    u = user(f"{a.url}, {b.url}", max_retries=2, breaker_failures=2, breaker_cooldown=60)
    assert u.config.endpoints == (a.url + "/chat/completions", b.url + "/chat/completions")
    assert [(await u.reply(FACT_REQUEST)).source for _ in range(6)] == ["llm"] * 6
    assert (a.served, b.served) == (3, 3)  # round-robin between idle replicas
    a.hold = True
    others = [user(f"{a.url},{b.url}", max_retries=2, breaker_failures=2) for _ in range(4)]
    burst = asyncio.gather(*(other.reply(FACT_REQUEST) for other in others))
    for _ in range(200):  # the least-loaded choice sends half the burst to each replica
        if len(a.held) == 2 and b.served == 5:
            break
        await asyncio.sleep(0.01)
    assert len(a.held) == 2 and b.served == 5
    await a.kill()  # mid-way: two requests in flight on it
    assert [r.source for r in await burst] == ["llm"] * 4  # each retried on the healthy replica
    assert [(o.stats.connection_errors, o.stats.retries) for o in others] == [(1, 1), (0, 0), (1, 1), (0, 0)]
    breaker_a, breaker_b = shared_breaker(u.config, u.config.endpoints[0]), shared_breaker(u.config, u.config.endpoints[1])
    assert breaker_a.failures == 2 and not breaker_a.available()  # the dead replica's circuit is open ...
    assert breaker_b.failures == 0 and breaker_b.available()  # ... the healthy one's is not
    served = b.served
    replies = [await u.reply(FACT_REQUEST) for _ in range(6)]
    assert [r.source for r in replies] == ["llm"] * 6 and b.served == served + 6  # all to the healthy replica
    assert (u.stats.connection_errors, u.stats.retries, u.stats.short_circuits, u.stats.fallbacks) == (0, 0, 0, 0)
    await b.kill()  # now every replica is dead: one reply's attempts open b's circuit, then it falls back at once
    out = await u.reply(FACT_REQUEST)
    assert out.source == "fallback" and out.error.startswith("circuit open at all 2 replicas")
    assert (u.stats.requests, u.stats.connection_errors, u.stats.short_circuits) == (12 + 2, 2, 1)


async def test_a_dead_replica_costs_one_retry_per_request_until_its_circuit_opens(replicas):
    a, b = replicas
    await a.kill()
    u = user(f"{a.url},{b.url}", max_retries=1, breaker_failures=3, breaker_cooldown=60)
    replies = [await u.reply(FACT_REQUEST) for _ in range(8)]
    assert [r.source for r in replies] == ["llm"] * 8 and b.served == 8
    # alternate choices reach the dead replica until 3 failures open its circuit: 3 retries, no fallback
    assert (u.stats.connection_errors, u.stats.retries, u.stats.requests) == (3, 3, 11)


async def test_replicas_share_one_concurrency_limit(replicas):
    a, b = replicas
    a.gauge["delay"] = 0.05
    users = [user(f"{a.url},{b.url}", concurrency=3) for _ in range(12)]  # separate users, one endpoint set
    replies = await asyncio.gather(*(u.reply(FACT_REQUEST) for u in users))
    assert all(r.source == "llm" for r in replies)
    assert a.gauge["max"] == 3 and a.served + b.served == 12
    # the least-loaded choice keeps one of the three in flight on each replica; the exact split follows which finishes first
    assert min(a.served, b.served) >= 3


def test_several_urls_are_checked():
    config = LLMUserConfig(url="http://h:1/v1,https://g:2/v1/chat/completions")
    assert config.endpoints == ("http://h:1/v1/chat/completions", "https://g:2/v1/chat/completions")
    assert config.endpoint == ",".join(config.endpoints)
    for bad in ("http://h:1/v1,", "http://h:1/v1,ftp://g/v1", "http://h:1/v1, http://h:1/v1/"):
        with pytest.raises(ValueError, match="^user_url: "):
            make_user(user="llm", user_url=bad)
