"""The episode driver on its own: a chat-message transcript with scripted turns, no verl."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from arew.envs.base import StepResult
from arew.envs.registry import make_env
from arew.episodes import ANSWER_NOW_NOTICE, EpisodeLog, play
from arew_preference.data import build_rows


class ScriptedTranscript:
    """Chat messages; the agent's turns come from ``texts``; ``rounds`` turns fit (None: no limit)."""

    def __init__(self, texts, rounds=None, side_texts=()):
        self.texts, self.side_texts = list(texts), list(side_texts)
        self.rounds = rounds
        self.messages: list[dict[str, str]] = []
        self.side_calls: list[tuple[str, str]] = []

    def round_fits(self) -> bool:
        return self.rounds is None or self._turns() < self.rounds

    async def generate(self) -> str:
        text = self.texts.pop(0)
        self.messages.append({"role": "assistant", "content": text})
        return text

    def add_feedback(self, text: str) -> bool:
        self.messages.append({"role": "user", "content": text})
        return True

    async def counterfactual_update(self, feedback: str) -> str:
        self.side_calls.append(("update", feedback))
        return self.side_texts.pop(0)

    async def counterfactual_action(self, belief: str) -> str | None:
        self.side_calls.append(("action", belief))
        return self.side_texts.pop(0)

    def _turns(self) -> int:
        return sum(m["role"] == "assistant" for m in self.messages)


@pytest.fixture()
def row():
    return build_rows("pe-g-s2", 2, 1, 1, seed=3)["train"][0]["extra_info"]


def _informative_query(info) -> str:
    items = np.asarray(info["items"], dtype=float)
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            for a in range(items.shape[1]):
                for b in range(a + 1, items.shape[1]):
                    diff = items[i, [a, b]] - items[j, [a, b]]
                    if diff[0] * diff[1] < 0:
                        return f"<scratch>q</scratch><interact>{i + 1}, {j + 1} | {a + 1}, {b + 1}</interact>"
    raise AssertionError("no informative query")


def test_the_driver_imports_no_verl():
    code = "import sys, arew.episodes; sys.exit(any(m == 'verl' or m.startswith('verl.') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


async def test_rounds_alternate_and_each_decision_gets_the_environments_critique(row):
    truth = ", ".join(f"{v:.2f}" for v in row["w_star"])
    query = _informative_query(row)
    texts = [query, f"<interact>{truth}</interact>", "garbage <interact>not numbers", f"<interact>{truth}</interact>", f"<answer>{truth}</answer>"]
    transcript, log = ScriptedTranscript(texts), EpisodeLog()
    env = make_env(row["task"], row, row["seed"])
    final = await play(env, transcript, log)

    replay = make_env(row["task"], row, row["seed"])
    expected = [(await replay.act(texts[0])).critique, replay.update(texts[1]).critique,
                (await replay.act(texts[2])).critique, replay.update(texts[3]).critique, replay.answer(texts[4]).critique]  # fmt: skip
    assert log.channels == ["as", "bt", "as", "bt", "bt"] and log.labels == expected
    assert final.valid and env.reward() == replay.reward() == 1.0
    assert log.invalid_turns == 1 and log.phase == "environment" and not (log.forced_answer or log.truncated)
    roles = [m["role"] for m in transcript.messages]
    assert roles == ["assistant", "user"] * 4 + ["assistant"]  # every decision but the answer got its feedback
    assert log.texts == texts
    assert log.replies == [m["content"] for m in transcript.messages if m["role"] == "user"] + [None]
    info = log.info(final, env.proxies())
    assert info["decisions"] == 5 and info["answered"] == 1.0 and info["invalid_turns"] == 1
    assert info["as_pos"] + info["as_zero"] + info["as_neg"] == 2 and "reward" not in info
    assert any(key.startswith("proxy_") for key in info)


async def test_the_last_turns_notice_and_the_final_answer_after_max_turns(row):
    truth = f"<interact>{', '.join(['0.5'] * 6)}</interact>"
    env = make_env(row["task"], row, row["seed"])
    texts = [_informative_query(row), truth] * env.max_turns + [f"<answer>{', '.join(['0.5'] * 6)}</answer>"]
    transcript, log = ScriptedTranscript(texts), EpisodeLog()
    final = await play(env, transcript, log)
    assert final is not None and final.channel == "bt" and len(log.labels) == 2 * env.max_turns + 1
    last_act_feedback = transcript.messages[-4]["content"]
    assert last_act_feedback.endswith(env.final_turn_notice())


@pytest.mark.parametrize("overflow", ["answer_now", "stop"])
async def test_the_budget_policy_when_no_round_fits(row, overflow):
    truth = ", ".join(["0.5"] * 6)
    texts = [_informative_query(row), f"<interact>{truth}</interact>", f"<answer>{truth}</answer>"]
    transcript, log = ScriptedTranscript(texts, rounds=2), EpisodeLog()
    final = await play(make_env(row["task"], row, row["seed"]), transcript, log, overflow=overflow)
    if overflow == "answer_now":
        assert log.forced_answer and final is not None and final.valid and len(log.labels) == 3
        assert transcript.messages[-2] == {"role": "user", "content": ANSWER_NOW_NOTICE}
        assert log.replies[1].endswith(ANSWER_NOW_NOTICE) and log.replies[2] is None
    else:
        assert log.truncated and final is None and len(log.labels) == 2 and transcript.texts  # the answer was never asked for


async def test_answer_now_needs_a_turn_first(row):
    transcript, log = ScriptedTranscript([], rounds=0), EpisodeLog()
    assert await play(make_env(row["task"], row, row["seed"]), transcript, log) is None
    assert log.truncated and not log.forced_answer and transcript.messages == []


class CounterfactualEnv:
    """Asks for both counterfactual generations and records what reached it."""

    max_turns = 2
    rounds = ("act", "update")

    def __init__(self):
        self.seen: list[tuple[str, str, str | None]] = []

    def counterfactual_belief(self) -> str | None:
        return "uniform belief" if self.seen else None

    def counterfactual_feedback(self) -> str | None:
        return "Unknown"

    async def act(self, text, counterfactual=None):
        self.seen.append(("act", text, counterfactual))
        return StepResult("answer", 1, "as", True)

    def update(self, text, counterfactual=None):
        self.seen.append(("update", text, counterfactual))
        return StepResult("ok", -1, "bt", True)

    def answer(self, text):
        self.seen.append(("answer", text, None))
        return StepResult("", 0, "bt", True, done=True)

    def final_turn_notice(self) -> str:
        return " last turn"


async def test_counterfactual_generations_reach_the_environment():
    env = CounterfactualEnv()
    transcript = ScriptedTranscript(["q1", "u1", "q2", "u2", "<answer>x</answer>"], side_texts=["cf-u1", "cf-q2", "cf-u2"])
    log = EpisodeLog()
    await play(env, transcript, log)
    assert transcript.side_calls == [("update", "Unknown"), ("action", "uniform belief"), ("update", "Unknown")]
    assert env.seen == [("act", "q1", None), ("update", "u1", "cf-u1"), ("act", "q2", "cf-q2"), ("update", "u2", "cf-u2"),
                        ("answer", "<answer>x</answer>", None)]  # fmt: skip
    assert log.labels == [1, -1, 1, -1, 0] and log.environment_seconds >= 0.0


async def test_an_unknown_overflow_policy_is_refused(row):
    with pytest.raises(ValueError, match="overflow"):
        await play(make_env(row["task"], row, row["seed"]), ScriptedTranscript([]), EpisodeLog(), overflow="truncate")


class ToolEnv:
    """Action rounds only (tau2's shape): each act is a tool call; the environment ends the episode at ``end_at``."""

    max_turns = 3
    rounds = ("act",)

    def __init__(self, end_at=None):
        self.end_at, self.acts = end_at, 0

    def counterfactual_belief(self):
        return None

    def counterfactual_feedback(self):
        return None

    async def act(self, text, counterfactual=None):
        self.acts += 1
        return StepResult(f"output {self.acts}", 1 if "call" in text else -1, "as", "call" in text, done=self.acts == self.end_at)

    def update(self, text, counterfactual=None):
        raise RuntimeError("no update rounds")

    def answer(self, text):
        return StepResult("", 0, "as", True, done=True)

    def final_turn_notice(self) -> str:
        return " last turn"


async def test_action_only_episodes_play_one_action_per_turn_then_the_final_answer():
    transcript, log = ScriptedTranscript(["call a", "oops", "call b", "<answer>bye</answer>"]), EpisodeLog()
    final = await play(ToolEnv(), transcript, log)
    assert final is not None and final.done and not log.ended_by_environment
    assert log.channels == ["as"] * 4 and log.labels == [1, -1, 1, 0]
    assert [m["content"] for m in transcript.messages if m["role"] == "user"] == ["output 1", "output 2", "output 3 last turn"]
    assert log.info(final, {})["answered"] == 1.0


async def test_an_action_the_environment_ends_the_episode_with_is_the_last_decision():
    env = ToolEnv(end_at=2)
    transcript, log = ScriptedTranscript(["call a", "call b", "never generated"]), EpisodeLog()
    final = await play(env, transcript, log)
    assert final.feedback == "output 2" and log.ended_by_environment and env.acts == 2
    assert log.labels == [1, 1] and transcript.texts == ["never generated"]
    assert [m["role"] for m in transcript.messages] == ["assistant", "user", "assistant"]  # its feedback ends nothing
    info = log.info(final, {})
    assert info["ended_by_environment"] == 1.0 and info["answered"] == 0.0 and info["decisions"] == 2


async def test_an_agent_answer_ends_an_action_only_episode_early():
    transcript, log = ScriptedTranscript(["call a", "<answer>done</answer>", "unused"]), EpisodeLog()
    final = await play(ToolEnv(), transcript, log)
    assert final.done and log.labels == [1, 0] and transcript.texts == ["unused"]


async def test_an_unknown_round_sequence_is_refused():
    env = ToolEnv()
    env.rounds = ("update", "act")
    with pytest.raises(ValueError, match="ToolEnv.rounds"):
        await play(env, ScriptedTranscript([]), EpisodeLog())
