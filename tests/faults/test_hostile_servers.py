"""The fault probe's hostile servers as a suite: every client of a chat-completions server (the critique judge,
``arew eval``'s endpoint model, the simulated user) against every reply of :data:`fakes.HOSTILE_REPLIES`, written at
the socket. Each must end in bounded time and memory with its own counted failure (no critique, a
``GenerationError``, the offline fallback), or read the reply where one can be read; nothing else may escape.
The tau2 customer meets the same table in envs/tau2/tests/test_customer.py. About 6 s in all (the trickle waits
out each client's 1 s timeout)."""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import dataclass
from typing import Any

import pytest

from arew.chat import ClientConfig
from arew.critiques import judge as judge_module
from arew.critiques.base import Decision, EpisodeContext
from arew.critiques.judge import JudgeConfig, JudgeSource
from arew.envs.users import FactRequest, LLMUser, LLMUserConfig
from arew.eval.endpoint import EndpointModel
from arew.eval.model import GenerationError, GenerationParams
from fakes import HOSTILE_REPLIES, HostileServer

TIMEOUT = 1.0  # each client's, with no retry: a failure costs one attempt
MEMORY_LIMIT = 8_000_000  # bytes a client may hold at its peak while a 50 MB body is offered (its cap is 64 KB)


@dataclass
class Outcome:
    read: Any  # what the client made of a reply it read, or None when it failed
    failures: int  # the failed attempts and unreadable replies it counted


async def judge(url: str) -> Outcome:
    source = JudgeSource(JudgeConfig(url=url, model="judge", timeout=TIMEOUT, max_retries=0, backoff=0, cache_size=0), "mediq")
    decision = Decision("<interact>Do you have a fever?</interact>", "as", "Yes.", 1)
    opening = ({"role": "user", "content": "A 40-year-old with a cough."},)
    [critique] = await source.critique(EpisodeContext("mediq", {}, opening, (decision,), "train:0:0"))
    failures = sum(source.stats[f"judge_{name}"] for name in ("timeouts", "connection_errors", "http_errors", "parse_failures", "unreadable"))
    return Outcome(critique.label, failures)


async def endpoint(url: str) -> Outcome:
    model = EndpointModel(ClientConfig(url=url, model="m", timeout=TIMEOUT, max_retries=0, backoff=0))
    try:
        turn = await model.complete([{"role": "user", "content": "Hot laptop."}], GenerationParams(max_tokens=16))
    except GenerationError:
        turn = None
    stats = model.stats
    return Outcome(turn and turn.text, stats.timeouts + stats.connection_errors + stats.http_errors + stats.parse_failures)


async def user(url: str) -> Outcome:
    simulated = LLMUser(LLMUserConfig(url=url, timeout=TIMEOUT, max_retries=0, backoff=0))
    answer = await simulated.reply(FactRequest("Do you have a fever?", ("She is 30.", "She has a fever."), (1,), 1))
    stats = simulated.stats
    read = answer.ids if answer.source == "llm" else None
    return Outcome(read, stats.timeouts + stats.connection_errors + stats.http_errors + stats.parse_failures)


# each client, the reply text it accepts, and what it reads from that text
CLIENTS = {"judge": (judge, "CRITIQUE: +1", 1), "endpoint": (endpoint, "Is it hot?", "Is it hot?"), "user": (user, "FACTS: 2", (1,))}


@pytest.fixture(autouse=True)
def fresh_judge_state(monkeypatch):
    monkeypatch.setattr(judge_module, "_CACHE", type(judge_module._CACHE)())


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("reply", HOSTILE_REPLIES)
async def test_a_hostile_server_costs_a_client_one_bounded_counted_failure(client, reply):
    ask, text, expected = CLIENTS[client]
    tracemalloc.start()
    started = time.monotonic()
    try:
        async with HostileServer(reply, text) as url:
            outcome = await ask(url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < TIMEOUT + 1.5
    assert peak < MEMORY_LIMIT, f"{client} held {peak / 1e6:.1f} MB"
    if HOSTILE_REPLIES[reply][1]:
        read = outcome.read.replace(" \ufffd", "") if isinstance(outcome.read, str) else outcome.read
        assert (read, outcome.failures) == (expected, 0)
    else:
        assert outcome.read is None and outcome.failures == 1
