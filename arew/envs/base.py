"""The protocol between an agent loop and an active-reasoning environment.

The environment owns everything task-specific (prompts, parsing of the agent's text, the
simulated user, critiques, reward, diagnostics); the loop owns tokens and turn order. The
loop drives one episode like this::

    env = make_env(extra_info["task"], extra_info, seed)   # arew.envs.registry
    messages = env.initial_messages()                       # system + first user message
    for t in range(env.max_turns):
        text = <agent writes: <scratch>...</scratch> then <interact>query</interact>>
        if payload_kind(text) == "answer": step = env.answer(text); break
        step = await env.act(text)                          # channel "as"
        feedback = step.feedback
        if t == env.max_turns - 1: feedback += env.final_turn_notice()
        text = <agent writes: <scratch>...</scratch> then <interact>numbers</interact>>
        if payload_kind(text) == "answer": step = env.answer(text); break
        step = env.update(text)                             # channel "bt"
    else:
        text = <agent writes: <scratch>...</scratch> then <answer>numbers</answer>>
        step = env.answer(text)                             # done=True
    reward = env.reward(); proxies = env.proxies()

A task whose ``rounds`` is ``("act",)`` (tau2 telecom: every decision is a tool call or a
message) has action rounds only: each turn is one ``act``, and the last one's feedback
carries the final-turn notice. A ``StepResult`` with ``done=True`` from ``act`` ends the
episode there (the environment ended it: a simulated customer's stop, a transfer); no final
answer is asked for.

``payload_kind`` is :func:`arew.envs.parsing.payload_kind`. Each ``StepResult.feedback`` is the
next user message and already contains the instruction for the next round; the
environment never appends :meth:`ActiveReasoningEnv.final_turn_notice` itself, the loop
does, to the last action round's feedback. Invalid text never ends an episode except in
``answer``: it gets critique -1, an "invalid because ..." feedback, and the round is spent.
Calling rounds out of order (``update`` before ``act``, anything after ``done``) is a bug in
the loop and raises ``RuntimeError``.

Every decision gets one critique: ``act`` on channel "as", ``update`` and ``answer`` on
channel "bt" (tasks without update rounds may put ``answer`` on "as"). The reward depends
on the text passed to ``answer`` or, for tasks judged on their environment's state, on the
state the episode's actions left.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar


class Channel:
    AS = "as"
    BT = "bt"


@dataclass
class StepResult:
    """What one agent decision produced: the next user message and its critique."""

    feedback: str
    critique: int
    channel: str
    valid: bool
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class ActiveReasoningEnv(abc.ABC):
    """One episode of an active-reasoning task; see the module docstring for the turn order."""

    max_turns: int
    # the rounds of one turn, in order: ("act", "update") or, for action-only tasks, ("act",)
    rounds: ClassVar[tuple[str, ...]] = ("act", "update")
    # the options from_row accepts (name -> arew.envs.options.Option), checked at trainer start-up
    OPTIONS: ClassVar[dict[str, Any]] = {}
    # whether from_row also takes the simulated-user options of arew.envs.users
    TAKES_USER_OPTIONS: ClassVar[bool] = False

    @classmethod  # noqa: B027 (an optional hook: most tasks need no check beyond the declared options)
    def check_option_values(cls, options: dict[str, Any], prefix: str) -> None:
        """Start-up checks beyond each declared option's type and range (settings that hold together,
        like a client's); raise ValueError naming ``prefix.key``. None by default."""

    @classmethod
    @abc.abstractmethod
    def from_row(cls, extra_info: dict[str, Any], seed: int, **options: Any) -> ActiveReasoningEnv:
        """Rebuild the episode from a dataset row's ``extra_info``; deterministic in ``seed``."""

    @property
    @abc.abstractmethod
    def system_prompt(self) -> str: ...

    @abc.abstractmethod
    def initial_messages(self) -> list[dict[str, str]]: ...

    @abc.abstractmethod
    async def act(self, text: str, counterfactual: str | None = None) -> StepResult:
        """Action round; async because some tasks consult an LLM-simulated user.
        ``counterfactual`` is the agent's action regenerated with its latest belief message
        replaced by :meth:`counterfactual_belief`, when the environment asked for one; else None."""

    @abc.abstractmethod
    def update(self, text: str, counterfactual: str | None = None) -> StepResult:
        """Belief-update round. ``counterfactual`` is the agent's update generated from the
        pre-feedback context with :meth:`counterfactual_feedback` in place of the real
        feedback, when the environment asked for one (MediQ's BT critique); else None."""

    def counterfactual_feedback(self) -> str | None:
        """Feedback text for a counterfactual update after the latest action, or None (default).

        When this returns text right after ``act``, the loop also generates an update from the
        context *before* the real feedback followed by this text (those tokens are not part of
        the trajectory) and passes it to ``update(text, counterfactual=...)``.
        """
        return None

    def counterfactual_belief(self) -> str | None:
        """Text to put in place of the agent's latest belief message, or None (default).

        When this returns text before an action round, the loop also generates an action from
        the conversation with that belief message replaced (not part of the trajectory) and
        passes it to ``act(text, counterfactual=...)``: an action that does not change when the
        belief does was not chosen from the belief (MediQ's optional counterfactual AS).
        """
        return None

    @abc.abstractmethod
    def answer(self, text: str) -> StepResult: ...

    @abc.abstractmethod
    def reward(self) -> float:
        """Outcome reward of the final answer; 0 when there is no valid final answer."""

    @abc.abstractmethod
    def proxies(self) -> dict[str, Any]:
        """Per-turn lists under "as" and "bt", plus scalar diagnostics (floats)."""

    @abc.abstractmethod
    def final_turn_notice(self) -> str: ...
