"""benchmarks/judge_overhead.py's measurement against a loopback chat server: the requests each arm sends for
one tiny step (decision mode one per decision, episode mode one per episode, the warm cache none); no timings."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def overhead(monkeypatch):
    """The benchmark module (its siblings import by name, as when it runs as a script), with an empty judge cache."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from arew.critiques import judge

    monkeypatch.setattr(judge, "_CACHE", type(judge._CACHE)())
    return importlib.import_module("judge_overhead")


def readable(n, body):
    """A judge that follows the format: one CRITIQUE line, or (mode=episode) a numbered line per decision."""
    asked = re.search(r"Judge each of the (\d+) decisions", body["messages"][-1]["content"])
    if asked is None:
        return "CRITIQUE: +1\nREASON: it asks for something new"
    return "\n".join(f"D{k}: 0 no change" for k in range(1, int(asked.group(1)) + 1))


async def test_each_arm_sends_the_requests_its_mode_promises(serve, overhead):
    server, url = await serve(readable)
    turns, episodes = 1, 2
    results = await overhead.measure(url, "judge", ["pe-g-s2", "mediq"], prompts=1, rollouts=episodes, turns=turns, steps=1, timeout=10)
    decisions = episodes * (2 * turns + 1)
    expected = {"none": 0, "decision": decisions, "decision, warm cache": 0, "episode": episodes}
    for task in ("pe-g-s2", "mediq"):
        arms = {r.arm: r for r in results if r.task == task}
        assert {arm: r.per_step("requests") for arm, r in arms.items()} == expected
        assert all(r.episodes == episodes and r.per_step("decisions") == decisions for r in arms.values())
        assert arms["decision, warm cache"].per_step("cache_hits") == decisions
        assert all(r.per_step(name) == 0 for r in arms.values() for name in ("unreadable", "missing", "failed"))
    assert len(server.bodies) == 2 * sum(expected.values())
    assert len(overhead.table(results)) == 2 + 2 * len(expected)  # the header, then a row per task and arm
