"""The episode driver: the rules of one active-reasoning episode, once, for every way of generating.

:func:`play` alternates action rounds (channel AS) and belief-update rounds (channel BT) as
:mod:`arew.envs.base` describes, asks for the final answer, records every decision's channel and
critique, runs the counterfactual generations the environment asks for, and applies the budget
policy. Tasks with ``rounds == ("act",)`` play action rounds only, and an action whose step
is ``done`` ends the episode (the environment ended it). How a turn is generated and how the context is kept is the :class:`Transcript`'s
business: verl's ``arew_agent`` loop keeps a token stream with its server manager
(:mod:`arew.verl_plugin.agent_loop`); an evaluation client can keep chat messages.
The log's ``phase`` names where a raise would come from: ``environment`` while the rounds run,
``generation`` during each of the transcript's generations (set here, for every transcript).

Critique sources (:mod:`arew.critiques`): with a task's :class:`arew.critiques.settings.CritiquePlan`
(``critiques``), the finished episode's decisions are labelled again by the plan's source and combined
with the environment's critiques (phase ``critique``); the log keeps both (``by_source``).

Budget policy: before each round the transcript says whether the round, its feedback and a
final answer still fit; feedback is only added when a full turn still fits after it. When
either fails, ``overflow="answer_now"`` tells the agent (:data:`ANSWER_NOW_NOTICE`) and asks for
its final answer, ``overflow="stop"`` ends the episode unanswered; both are recorded.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from arew.critiques.base import Decision, EpisodeContext
from arew.critiques.settings import CritiquePlan
from arew.envs.base import ActiveReasoningEnv, StepResult
from arew.envs.parsing import payload_kind

OVERFLOW_POLICIES = ("answer_now", "stop")
ROUND_SEQUENCES = (("act", "update"), ("act",))
ANSWER_NOW_NOTICE = (
    "\n\nThe conversation has reached its length budget. This is your final turn: "
    "give your final answer now in <answer>...</answer>."
)


def episode_name(extra_info: Mapping[str, Any], session: int) -> str:
    """``split:row:session``: stable across runs (unlike verl's per-prompt uids), shared by training and evaluation."""
    return f"{extra_info.get('split', '')}:{extra_info.get('index', '')}:{session}"


def episode_seed(name: str) -> int:
    """Stable per (row, rollout session) so that repeated samples of a prompt differ but replay."""
    return zlib.crc32(name.encode())


class Transcript(Protocol):
    """The context of one episode and the agent that continues it."""

    def round_fits(self) -> bool:
        """Room for one more round, its feedback and, after it, a final answer."""

    async def generate(self) -> str:
        """The agent's next turn, appended to the transcript; returns its text."""

    def add_feedback(self, text: str) -> bool:
        """Append the environment's message; False, changing nothing, if no full turn would fit after it."""

    async def counterfactual_update(self, feedback: str) -> str:
        """The agent's update from the pre-feedback context with ``feedback`` instead; not appended."""

    async def counterfactual_action(self, belief: str) -> str | None:
        """The agent's next action with its latest belief replaced by ``belief``; not appended (None: no belief yet)."""


@dataclass
class EpisodeLog:
    """What the driver records of one episode, and the phase it is in (its failure reason if it raises).

    ``channels``, ``labels``, ``texts`` and ``replies`` hold one entry per decision: its channel,
    the environment's critique, the agent's text and the environment's message after it (None
    when none followed: the final answer, an action that ended the episode, feedback that did
    not fit). They are what rollout tables and transcripts show turn by turn.
    """

    phase: str = "setup"
    channels: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    replies: list[str | None] = field(default_factory=list)
    # with a critique source: each source's labels ("rules": the environment's) and the episode's critique_* counts
    by_source: dict[str, list[int]] = field(default_factory=dict)
    critique_counts: dict[str, float] = field(default_factory=dict)
    critique_reasons: list[str] = field(default_factory=list)  # the source's reason per decision
    invalid_turns: int = 0
    forced_answer: bool = False
    truncated: bool = False
    ended_by_environment: bool = False
    environment_seconds: float = 0.0

    def record(self, step: StepResult, text: str) -> StepResult:
        self.channels.append(step.channel)
        self.labels.append(int(step.critique))
        self.texts.append(text)
        self.replies.append(None)
        self.invalid_turns += int(not step.valid)
        return step

    def turns(self) -> list[dict[str, Any]]:
        """One dict per decision: the agent's text, its channel and critique, and the reply it got; with a
        critique source also each source's label (``sources``, "rules" the environment's) and the source's reason."""
        turns = [
            {"agent": text, "channel": channel, "critique": label, "feedback": reply}
            for text, channel, label, reply in zip(self.texts, self.channels, self.labels, self.replies)
        ]
        if self.by_source:
            for i, turn in enumerate(turns):
                turn["sources"] = {name: labels[i] for name, labels in self.by_source.items()}
                turn["reason"] = self.critique_reasons[i]
        return turns

    def info(self, final_step: StepResult | None, proxies: Mapping[str, Any]) -> dict[str, float]:
        """Per-episode numbers: decisions, critique counts per channel, and the environment's proxies (``proxy_*``)."""
        info: dict[str, float] = {
            "decisions": float(len(self.labels)),
            "invalid_turns": float(self.invalid_turns),
            "answered": float(final_step is not None and final_step.valid and not self.ended_by_environment),
            "forced_answer": float(self.forced_answer),
            "truncated": float(self.truncated),
            "ended_by_environment": float(self.ended_by_environment),
        }
        for channel in ("as", "bt"):
            labels = [z for c, z in zip(self.channels, self.labels) if c == channel]
            for name, value in (("pos", 1), ("zero", 0), ("neg", -1)):
                info[f"{channel}_{name}"] = float(sum(z == value for z in labels))
        info.update({f"critique_{key}": float(value) for key, value in self.critique_counts.items()})
        for key, value in proxies.items():
            if key == "reward":
                continue  # trainers log the reward themselves; verl's validation table breaks on a second "reward"
            if isinstance(value, (list, tuple)):
                numbers = [float(v) for v in value]
                info[f"proxy_{key}_mean"] = sum(numbers) / len(numbers) if numbers else 0.0
            elif isinstance(value, (int, float)):
                info[f"proxy_{key}"] = float(value)
        return info


@dataclass(frozen=True)
class EpisodeCritiques:
    """A task's critique plan and what its source is told of the episode beside the decisions."""

    plan: CritiquePlan
    task: str
    row: Mapping[str, Any]
    messages: tuple[Mapping[str, str], ...]
    name: str = ""


async def play(
    env: ActiveReasoningEnv,
    transcript: Transcript,
    log: EpisodeLog,
    overflow: str = "answer_now",
    critiques: EpisodeCritiques | None = None,
) -> StepResult | None:
    """Drive the rounds; returns the final answer's StepResult (or the action's that ended the
    episode), or None if the episode ended unanswered. With ``critiques``, the source relabels the decisions."""
    final = await _rounds(env, transcript, log, overflow)
    if critiques is not None:
        log.phase = "critique"
        await _relabel(log, critiques)
        log.phase = "environment"
    return final


async def _relabel(log: EpisodeLog, critiques: EpisodeCritiques) -> None:
    decisions = tuple(Decision(*turn) for turn in zip(log.texts, log.channels, log.replies, log.labels))
    episode = EpisodeContext(critiques.task, critiques.row, critiques.messages, decisions, critiques.name)
    combined = await critiques.plan.label(episode)
    log.labels, log.by_source, log.critique_counts = combined.labels, combined.by_source, combined.counts
    log.critique_reasons = combined.reasons


async def _rounds(env: ActiveReasoningEnv, transcript: Transcript, log: EpisodeLog, overflow: str) -> StepResult | None:
    if overflow not in OVERFLOW_POLICIES:
        raise ValueError(f"overflow: must be one of {list(OVERFLOW_POLICIES)}, got {overflow!r}")
    if tuple(env.rounds) not in ROUND_SEQUENCES:
        raise ValueError(f"{type(env).__name__}.rounds: must be one of {list(ROUND_SEQUENCES)}, got {env.rounds!r}")
    log.phase = "environment"
    for turn in range(env.max_turns):
        counterfactual = None
        for round_kind in env.rounds:
            if not transcript.round_fits():
                return await _overflow(env, transcript, log, overflow)
            cf_action = None
            if round_kind == "act" and (cf_belief := env.counterfactual_belief()) is not None:
                cf_action = await _generating(log, transcript.counterfactual_action(cf_belief))
            text = await _generating(log, transcript.generate())
            if payload_kind(text) == "answer":
                return _answer(env, log, text)
            if round_kind == "act":
                started = time.perf_counter()
                step = await env.act(text, counterfactual=cf_action)
                log.environment_seconds += time.perf_counter() - started
                cf_feedback = env.counterfactual_feedback()
                if cf_feedback is not None:
                    counterfactual = await _generating(log, transcript.counterfactual_update(cf_feedback))
            else:
                step = env.update(text, counterfactual=counterfactual)
            log.record(step, text)
            if step.done:
                log.ended_by_environment = True
                return step
            feedback = step.feedback
            if round_kind == "act" and turn == env.max_turns - 1:
                feedback += env.final_turn_notice()
            if not transcript.add_feedback(feedback):
                return await _overflow(env, transcript, log, overflow)
            log.replies[-1] = feedback
    return _answer(env, log, await _generating(log, transcript.generate()))


async def _overflow(env: ActiveReasoningEnv, transcript: Transcript, log: EpisodeLog, overflow: str) -> StepResult | None:
    if overflow == "answer_now" and log.labels and transcript.add_feedback(ANSWER_NOW_NOTICE):
        log.forced_answer = True
        log.replies[-1] = (log.replies[-1] or "") + ANSWER_NOW_NOTICE
        return _answer(env, log, await _generating(log, transcript.generate()))
    log.truncated = True
    return None


def _answer(env: ActiveReasoningEnv, log: EpisodeLog, text: str) -> StepResult:
    return log.record(env.answer(text), text)


async def _generating(log: EpisodeLog, call):
    """Await one of the transcript's generations with the log in phase ``generation`` (a raise there is its reason)."""
    caller, log.phase = log.phase, "generation"
    result = await call
    log.phase = caller
    return result
