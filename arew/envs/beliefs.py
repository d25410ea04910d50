"""Turn order and belief bookkeeping shared by the task environments: the task SDK's episode classes.

Every task plays the same episode (see :mod:`arew.envs.base`): a question in <interact>, a belief
vector in <interact>, judged against the previous *valid* belief, and a final vector in
<answer>. :class:`BeliefEnv` owns that machinery; a task supplies its opening (:meth:`BeliefEnv.opening`),
its questions and their critique (``act``, built on :meth:`BeliefEnv.open_turn` and
:meth:`BeliefEnv.action_step`), its BT rule (:meth:`BeliefEnv.bt_proxy`, :meth:`BeliefEnv.judge_belief`), its
wording (:class:`BeliefPrompts`), reward and proxies. :class:`ChoiceEnv` adds what the tasks that
pick one of several options share. A task's ``act`` in full (``envs/number_search`` is the whole task)::

    async def act(self, text):
        query = self.open_turn(text, lambda payload: parse_threshold(payload, self.n_candidates))
        if not query.ok:
            return self.invalid_question(query.error)  # critique -1, the round is spent
        news = ...  # whether the answer can change the belief
        return self.action_step(reply, critique=1 if news else -1, as_proxy=int(news), news=news, k=query.value)
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from arew.envs import parsing, scoring
from arew.envs.base import ActiveReasoningEnv, Channel, StepResult


class BeliefPrompts(Protocol):
    """What an :class:`BeliefEnv` asks of its task's prompts (a module of these functions, typically)."""

    def query_instruction(self, turn: int, max_turns: int) -> str:
        """The instruction before action round ``turn + 1`` (``turn`` rounds done of ``max_turns``)."""

    def update_instruction(self) -> str:
        """The instruction after an answer: state the updated belief."""

    def answer_instruction(self) -> str:
        """The instruction after the last update: give the final answer."""

    def final_turn_notice(self) -> str:
        """What the agent reads when the token budget leaves room for the answer only."""


class BeliefEnv(ActiveReasoningEnv):
    """One episode's phase, turn count, belief and per-turn proxies; see the module docstring."""

    prompts: BeliefPrompts
    """The task's wording (:class:`BeliefPrompts`); a module with those four functions will do."""

    # Feedback wording; "{}" is the parse error.
    RECORDED: str
    INVALID_BELIEF: str
    FINAL_RECORDED: str
    INVALID_FINAL: str
    INVALID_QUESTION: str

    def __init__(self, max_turns: int, prior: np.ndarray):
        self.max_turns = int(max_turns)
        self._phase = "act"
        self._turn = 0
        self._informative = False  # whether the latest question's answer carried news
        self._belief = prior
        self._first_guess: np.ndarray | None = None
        self._final: np.ndarray | None = None
        self._final_step = 0.0  # BT proxy of a final answer that follows an update round
        self._as: list[int] = []
        self._bt: list[float] = []
        self._n_invalid = 0

    @property
    def phase(self) -> str:
        """Which call the episode expects next: "act", "update", "answer" or "done"."""
        return self._phase

    @property
    def turn(self) -> int:
        """Action rounds opened so far (the current one included)."""
        return self._turn

    @property
    def belief(self) -> np.ndarray:
        """The latest valid belief (the prior before the first one)."""
        return self._belief

    @property
    def informative(self) -> bool:
        """Whether the latest question's answer carried news: the update that follows must respond to it."""
        return self._informative

    @property
    def first_guess(self) -> np.ndarray | None:
        """The first valid belief of the episode (None before it)."""
        return self._first_guess

    @property
    def final_belief(self) -> np.ndarray | None:
        """The valid final answer (None before it, or when it was invalid)."""
        return self._final

    @property
    def as_proxies(self) -> list[int]:
        """Each action round's AS proxy so far (a copy)."""
        return list(self._as)

    @abc.abstractmethod
    def opening(self) -> str:
        """The task as the first user message shows it, before the first instruction."""

    def initial_messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.opening() + "\n\n" + self.prompts.query_instruction(0, self.max_turns)},
        ]

    def final_turn_notice(self) -> str:
        return self.prompts.final_turn_notice()

    def _update_instruction(self) -> str:
        return self.prompts.update_instruction()

    def _answer_instruction(self) -> str:
        return self.prompts.answer_instruction()

    def _expect(self, *phases: str) -> None:
        if self._phase not in phases:
            raise RuntimeError(f"episode expects {self._phase!r} next, not {phases[0]!r}")

    def open_turn(self, text: str, parse: Callable[[str], parsing.ParseResult]) -> parsing.ParseResult:
        """Start an action round and parse its question from <interact> with ``parse`` (the task's question
        parser, given the payload); an error result is answered with :meth:`invalid_question`."""
        self._expect("act")
        self._turn += 1
        self._phase = "update"
        payload = parsing.extract_payload(text, "interact")
        return payload if not payload.ok else parse(payload.value)

    def action_step(
        self, reply: str, *, critique: int, as_proxy: int, news: bool, valid: bool = True, **info: Any
    ) -> StepResult:
        """The step that answers a question: ``reply`` (the user's answer), the question's ``critique``
        (+1/0/-1), its ``as_proxy`` (how informative it was, the task's own measure), ``news`` (whether the
        next update must respond to it, :attr:`informative`); ``info`` goes into the step's info."""
        self._as.append(as_proxy)
        self._informative = news
        return StepResult(
            feedback=reply + "\n" + self._update_instruction(),
            critique=critique,
            channel=Channel.AS,
            valid=valid,
            info={"turn": self._turn, **info, "as_proxy": as_proxy},
        )

    def invalid_question(self, error: str) -> StepResult:
        """The step of a question that did not parse: critique -1, no news, the round spent; ``error`` says why."""
        self._n_invalid += 1
        return self.action_step(self.INVALID_QUESTION.format(error), critique=-1, as_proxy=0, news=False, valid=False, error=error)

    def parse_belief(self, text: Any, tag: str) -> parsing.ParseResult:
        """The belief vector in ``<tag>`` of ``text``, the size of the prior (an error says why it is not)."""
        payload = parsing.extract_payload(text, tag)
        return payload if not payload.ok else parsing.parse_vector(payload.value, self._belief.size)

    @abc.abstractmethod
    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        """How much closer ``w`` is to the truth than the previous valid belief ``prev``."""

    @abc.abstractmethod
    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        """(BT critique, rule) of a valid belief ``w``: ``delta`` is its :meth:`bt_proxy` against the previous
        valid belief; ``role`` is "update" or "answer" (a final answer in place of an update round, which
        gets no counterfactual); ``counterfactual`` the belief stated again without the answer, when the task
        asks for one."""

    def _record_belief(
        self, text: str, tag: str, role: str, counterfactual: str | None = None
    ) -> tuple[parsing.ParseResult, int, float, str]:
        """Parse and judge a belief, keeping it when valid: (guess, critique, BT proxy, rule).
        ``role`` "final" is an answer that takes no update round's place: a valid one gets 0."""
        guess = self.parse_belief(text, tag)
        if not guess.ok:
            self._n_invalid += 1
            return guess, -1, 0.0, "invalid"
        w = np.asarray(guess.value, dtype=float)
        delta = self.bt_proxy(w, self._belief)
        critique, rule = (0, "final") if role == "final" else self.judge_belief(w, delta=delta, role=role, counterfactual=counterfactual)
        self._belief = w
        if self._first_guess is None:
            self._first_guess = w
        return guess, critique, delta, rule

    def _bt_info(self, guess: parsing.ParseResult, rule: str, **info: Any) -> dict[str, Any]:
        info = {"turn": self._turn, "error": guess.error, **info}
        return {**info, "bt_rule": rule}

    def update(self, text: str, counterfactual: str | None = None) -> StepResult:
        self._expect("update")
        guess, critique, delta, rule = self._record_belief(text, "interact", "update", counterfactual)
        self._bt.append(delta)
        self._informative = False
        self._phase = "act" if self._turn < self.max_turns else "answer"
        follow = (
            self.prompts.query_instruction(self._turn, self.max_turns)
            if self._phase == "act"
            else self._answer_instruction()
        )
        head = self.RECORDED if guess.ok else self.INVALID_BELIEF.format(guess.error)
        return StepResult(
            feedback=head + "\n" + follow,
            critique=critique,
            channel=Channel.BT,
            valid=guess.ok,
            info=self._bt_info(guess, rule, bt_proxy=delta),
        )

    def answer(self, text: str) -> StepResult:
        self._expect("act", "update", "answer")
        replaces_update = self._phase == "update"
        guess, critique, delta, rule = self._record_belief(text, "answer", "answer" if replaces_update else "final")
        if replaces_update:
            self._bt.append(delta)
        else:
            self._final_step = delta
        self._phase = "done"
        if guess.ok:
            self._final = np.asarray(guess.value, dtype=float)
        return StepResult(
            feedback=self.FINAL_RECORDED if guess.ok else self.INVALID_FINAL.format(guess.error),
            critique=critique,
            channel=Channel.BT,
            valid=guess.ok,
            done=True,
            info=self._bt_info(guess, rule, reward=self.reward()),
        )

    def episode_proxies(self) -> dict[str, Any]:
        """The proxies every task reports, besides its own (a task's ``proxies()`` adds its own to these).

        ``bt`` holds one BT proxy per update round (a final answer given in place of an update
        round is that round's entry); ``bt_final`` is the belief step of a final answer that
        follows an update round (0 otherwise, and 0 for an invalid answer).

        ``c_bt`` is Def. 3.2's sum of absorbed belief progress, sum_{t=0}^{H-1} max(dPsi_t, 0),
        over the whole chain of valid beliefs from the prior b_0 to the final answer b_H, so
        the final answer's step counts; the task's BT proxy stands in for
        dPsi = Psi(b_{t+1}) - Psi(b_t) (PE: cos(w, w*); MediQ: the gold margin; FloDial:
        w[gold]), each a confidence in the true state like the paper's Psi(b) = b(s*).
        """
        steps = np.asarray([*self._bt, self._final_step], dtype=float)
        return {
            "as": list(self._as),
            "bt": list(self._bt),
            "bt_final": float(self._final_step),
            "reward": self.reward(),
            "answered": float(self._final is not None),
            "n_invalid": float(self._n_invalid),
            "c_bt": float(np.clip(steps, 0.0, None).sum()),
        }


def top_options(w: np.ndarray) -> frozenset[int]:
    """The options whose score is within :data:`arew.envs.scoring.EQUAL_TOL` of the top score."""
    w = np.asarray(w, dtype=float)
    return frozenset(np.flatnonzero(w >= w.max() - scoring.EQUAL_TOL).tolist())


class ChoiceEnv(BeliefEnv):
    """A task whose belief scores options in [0, 1] and whose answer is the unique top score."""

    RECORDED = "Scores recorded."
    INVALID_BELIEF = "Your scores were invalid because {}. Your previous valid scores are kept."
    FINAL_RECORDED = "Final answer recorded."

    def __init__(self, max_turns: int, n_options: int, gold: int):
        super().__init__(max_turns, np.full(n_options, 1.0 / n_options))
        self.gold = int(gold)

    def reward(self) -> float:
        if self._final is None:
            return 0.0
        return float(scoring.unique_argmax(self._final) == self.gold)

    def choice_proxies(self) -> dict[str, float]:
        """``final_equals_first_guess`` is Observation 3's belief consistency: the final answer
        states the same judgment as the first valid belief, i.e. the same set of top options
        (scores within :data:`arew.envs.scoring.EQUAL_TOL` of the maximum). A tie is the judgment
        "one of these", so it equals only the identical tie: two different ties are not
        consistent, nor are a tie and a single option (resolving or opening a tie revises the
        judgment), while a tie kept unchanged to the end is. 0 without a valid final answer.
        """
        first_correct = self._first_guess is not None and scoring.unique_argmax(self._first_guess) == self.gold
        consistent = (
            self._final is not None
            and self._first_guess is not None
            and top_options(self._final) == top_options(self._first_guess)
        )
        return {
            "belief_correct": float(scoring.unique_argmax(self._belief) == self.gold),
            "first_guess_correct": float(first_correct),
            "final_equals_first_guess": float(consistent),
        }
