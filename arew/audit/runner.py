"""Play scripted policies against an environment and score the critiques each one earns.

A :class:`TaskAudit` names a task, the rows to play and its policies: one competent policy (it
does the task the way the critiques mean to reward) and adversarial ones (each tries one way of
earning +1 without doing the task). :func:`score_policy` plays a policy through the episode
driver (:func:`arew.episodes.driver.play`, the same rules as training and ``arew eval``) and
tallies its critiques and reward; :func:`exploits` names the adversaries that out-earn the
competent policy in critique score while reaching a lower reward: a critique a trained policy
would learn to farm.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from arew.envs.base import ActiveReasoningEnv
from arew.envs.registry import make_env
from arew.episodes.driver import EpisodeLog, episode_name, episode_seed, play

CHANNELS = ("as", "bt")
# a score difference below this is a tie (the mean of hundreds of {-1, 0, +1} values)
SCORE_TOLERANCE = 1e-9
# an adversary out-earns the competent policy only by more than this many standard errors of the difference
EXPLOIT_MARGIN_SE = 2.0


@dataclass
class View:
    """What a scripted policy sees when asked for its next text.

    ``round`` is "act", "update" or "answer" (the driver asks for the answer after the last
    round), or "counterfactual_update" / "counterfactual_action" for the side generations an
    environment asks for (``feedback`` is then the counterfactual text). ``history`` holds the
    (text, feedback) pairs of the decisions so far. Policies may read ``env``: the competent ones
    are oracles, and an adversary with privileged knowledge is a stronger test.
    """

    env: ActiveReasoningEnv
    round: str
    turn: int
    feedback: str
    history: list[tuple[str, str]] = field(default_factory=list)


def vector_text(w: Sequence[float], decimals: int = 3) -> str:
    """A belief vector as the policies write it in <interact> or <answer>: clipped to [0, 1], comma separated."""
    return ", ".join(f"{min(max(float(x), 0.0), 1.0):.{decimals}f}" for x in w)


class Policy(Protocol):
    def __call__(self, view: View) -> str:
        """The agent's whole text for this round (tags included)."""


@dataclass(frozen=True)
class TaskAudit:
    """One environment under audit: ``rows(n, seed)`` gives n rows' ``extra_info``."""

    name: str
    task: str
    rows: Callable[[int, int], list[dict[str, Any]]]
    competent: Callable[[], Policy]
    adversaries: dict[str, Callable[[], Policy]]
    env_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class PolicyScore:
    """A policy's critiques and reward over its episodes."""

    audit: str
    policy: str
    episodes: int = 0
    reward: float = 0.0  # mean
    counts: dict[str, dict[int, int]] = field(default_factory=lambda: {c: {1: 0, 0: 0, -1: 0} for c in CHANNELS})
    # each episode's (channel, critique) per decision: the critique score is a mean over episodes
    episode_labels: list[tuple[tuple[str, int], ...]] = field(default_factory=list)

    def add_episode(self, reward: float, labels: Sequence[tuple[str, int]]) -> None:
        self.episodes += 1
        self.reward += (reward - self.reward) / self.episodes
        self.episode_labels.append(tuple(labels))
        for channel, label in labels:
            self.counts[channel][label] += 1

    def decisions(self, channel: str | None = None) -> int:
        return sum(sum(self.counts[c].values()) for c in ((channel,) if channel else CHANNELS))

    def share(self, value: int, channel: str | None = None) -> float:
        n = self.decisions(channel)
        return sum(self.counts[c][value] for c in ((channel,) if channel else CHANNELS)) / n if n else 0.0

    def _episode_means(self, channel: str | None) -> list[float]:
        means = []
        for labels in self.episode_labels:
            mine = [label for c, label in labels if channel in (None, c)]
            if mine:
                means.append(sum(mine) / len(mine))
        return means

    def score(self, channel: str | None = None) -> float | None:
        """Critique score: the mean over episodes of each episode's mean critique (None without decisions). Each
        episode weighs the same, as each trajectory's critiques move credit only among its own decisions: a
        policy whose episodes are longer is not scored by them more."""
        means = self._episode_means(channel)
        return sum(means) / len(means) if means else None

    def standard_error(self, channel: str | None = None) -> float:
        """The score's standard error over episodes (0 with fewer than two)."""
        means = self._episode_means(channel)
        if len(means) < 2:
            return 0.0
        mean = sum(means) / len(means)
        return math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1) / len(means))


class _ScriptedTranscript:
    """The driver's transcript for a scripted policy: no token budget, the policy writes every turn."""

    def __init__(self, policy: Policy, env: ActiveReasoningEnv):
        self.policy, self.env = policy, env
        self.generated = 0
        self.feedback = ""
        self.history: list[tuple[str, str]] = []
        self.pending: str | None = None

    def _view(self, round_name: str, feedback: str) -> View:
        rounds = self.env.rounds
        turn, index = divmod(self.generated, len(rounds))
        if round_name == "next":
            round_name = "answer" if turn >= self.env.max_turns else rounds[index]
        return View(self.env, round_name, turn, feedback, list(self.history))

    def round_fits(self) -> bool:
        return True

    async def generate(self) -> str:
        text = self.policy(self._view("next", self.feedback))
        self.generated += 1
        self.pending = text
        return text

    def add_feedback(self, text: str) -> bool:
        self.history.append((self.pending or "", text))
        self.feedback = text
        return True

    async def counterfactual_update(self, feedback: str) -> str:
        return self.policy(self._view("counterfactual_update", feedback))

    async def counterfactual_action(self, belief: str) -> str | None:
        return self.policy(self._view("counterfactual_action", belief))


async def play_scripted(
    task: str, policy: Policy, extra_info: dict[str, Any], session: int = 0, env_options: dict[str, Any] | None = None
) -> tuple[ActiveReasoningEnv, EpisodeLog]:
    """One episode of ``policy`` on a row of ``task``, seeded as in training: the finished environment and the driver's log."""
    env = make_env(task, extra_info, episode_seed(episode_name(extra_info, session)), **(env_options or {}))
    log = EpisodeLog()
    await play(env, _ScriptedTranscript(policy, env), log)
    return env, log


async def play_policy(audit: TaskAudit, policy: Policy, extra_info: dict[str, Any], session: int = 0) -> tuple[float, EpisodeLog]:
    """One episode of ``policy`` on a row: its reward and the driver's log."""
    env, log = await play_scripted(audit.task, policy, extra_info, session, audit.env_options)
    return float(env.reward()), log


def score_policy(audit: TaskAudit, name: str, rows: Sequence[dict[str, Any]]) -> PolicyScore:
    """``name`` ("competent" or an adversary's name) played once on every row."""
    make = audit.competent if name == "competent" else audit.adversaries[name]
    result = PolicyScore(audit.name, name)

    async def run() -> None:
        for info in rows:
            reward, log = await play_policy(audit, make(), info)
            result.add_episode(reward, list(zip(log.channels, log.labels)))

    asyncio.run(run())
    return result


def run_audit(audit: TaskAudit, n_rows: int, seed: int = 0) -> list[PolicyScore]:
    """The competent policy first, then every adversary, on the same rows."""
    rows = audit.rows(n_rows, seed)
    return [score_policy(audit, name, rows) for name in ("competent", *audit.adversaries)]


def exploits(scores: Sequence[PolicyScore]) -> list[str]:
    """The adversaries that earn a higher critique score than the competent policy (overall, or in a
    channel where both decided) while reaching a lower reward, each with what it out-earned. Higher means
    by more than :data:`EXPLOIT_MARGIN_SE` standard errors of the difference: a score within the noise of
    the rows (the competent policy stopping early on some) is no evidence of a shortcut."""
    competent = next(s for s in scores if s.policy == "competent")
    found = []
    for adversary in scores:
        if adversary is competent or adversary.reward >= competent.reward:
            continue
        for channel in (None, *CHANNELS):
            mine, theirs = adversary.score(channel), competent.score(channel)
            noise = EXPLOIT_MARGIN_SE * math.hypot(adversary.standard_error(channel), competent.standard_error(channel))
            if mine is not None and theirs is not None and mine > theirs + noise + SCORE_TOLERANCE:
                where = channel.upper() if channel else "overall"
                found.append(
                    f"{adversary.audit}/{adversary.policy}: {where} critique score {mine:+.3f} > competent {theirs:+.3f}"
                    f" with reward {adversary.reward:.3f} < {competent.reward:.3f}"
                )
    return found
