"""Turn order and belief bookkeeping shared by the task environments.

Every task plays the same episode (see :mod:`arew.envs.base`): a question in <interact>, a belief
vector in <interact>, judged against the previous *valid* belief, and a final vector in
<answer>. :class:`Episode` owns that machinery; a task supplies its questions and their
critique (``act``), its BT rule (:meth:`Episode._judge`), its wording, reward and proxies.
:class:`ChoiceEpisode` adds what the tasks that pick one of several options share.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from arew.envs import parsing, scoring
from arew.envs.base import ActiveReasoningEnv, Channel, StepResult


class Episode(ActiveReasoningEnv):
    """One episode's phase, turn count, belief and per-turn proxies; see the module docstring."""

    prompts: ModuleType
    """The task's prompts: ``query_instruction(turn, max_turns)``, ``update_instruction()``,
    ``answer_instruction()`` and ``final_turn_notice()``."""

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

    @abc.abstractmethod
    def _opening(self) -> str:
        """The task as the first user message shows it, before the first instruction."""

    def initial_messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._opening() + "\n\n" + self.prompts.query_instruction(0, self.max_turns)},
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

    def _open_turn(self, text: str, parse: Callable[[str], parsing.ParseResult]) -> parsing.ParseResult:
        """Start an action round and parse its question from <interact>."""
        self._expect("act")
        self._turn += 1
        self._phase = "update"
        payload = parsing.extract_payload(text, "interact")
        return payload if not payload.ok else parse(payload.value)

    def _action_step(
        self, reply: str, critique: int, as_proxy: int, news: bool, /, valid: bool = True, **info: Any
    ) -> StepResult:
        """The answer to a question; ``news`` says whether the next update must respond to it."""
        self._as.append(as_proxy)
        self._informative = news
        return StepResult(
            feedback=reply + "\n" + self._update_instruction(),
            critique=critique,
            channel=Channel.AS,
            valid=valid,
            info={"turn": self._turn, **info, "as_proxy": as_proxy},
        )

    def _invalid_question(self, error: str) -> StepResult:
        self._n_invalid += 1
        return self._action_step(self.INVALID_QUESTION.format(error), -1, 0, False, valid=False, error=error)

    def _parse_belief(self, text: Any, tag: str) -> parsing.ParseResult:
        payload = parsing.extract_payload(text, tag)
        return payload if not payload.ok else parsing.parse_vector(payload.value, self._belief.size)

    @abc.abstractmethod
    def _bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        """How much closer ``w`` is to the truth than the previous valid belief ``prev``."""

    @abc.abstractmethod
    def _judge(self, w: np.ndarray, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        """(BT critique, rule) of a valid belief; ``role`` is "update" or "answer" (a final
        answer in place of an update round, which gets no counterfactual)."""

    def _record_belief(
        self, text: str, tag: str, role: str, counterfactual: str | None = None
    ) -> tuple[parsing.ParseResult, int, float, str]:
        """Parse and judge a belief, keeping it when valid: (guess, critique, BT proxy, rule).
        ``role`` "final" is an answer that takes no update round's place: a valid one gets 0."""
        guess = self._parse_belief(text, tag)
        if not guess.ok:
            self._n_invalid += 1
            return guess, -1, 0.0, "invalid"
        w = np.asarray(guess.value, dtype=float)
        delta = self._bt_proxy(w, self._belief)
        critique, rule = (0, "final") if role == "final" else self._judge(w, delta, role, counterfactual)
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

    def _episode_proxies(self) -> dict[str, Any]:
        """The proxies every task reports, besides its own.

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


class ChoiceEpisode(Episode):
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

    def _choice_proxies(self) -> dict[str, float]:
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
