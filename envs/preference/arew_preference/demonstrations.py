"""Scripted PE-G players (two attributes a question) whose question informativeness and belief-update quality are knobs: the
transcripts a small language model is fine-tuned on before RL (``arew lm-lab``).

Every competent step is written so that a small model can learn it from the text in front of it, with the
work shown in the scratch line:

- question round: with probability ``inform`` the *scheduled comparison*: at turn t (from 1) movies t and t+1
  (the last turn wraps to movie 1). The scratch copies their two lines of the score table, then a sign line
  with, for every attribute, its number and the sign of the first movie's score minus the second's::

      Movie 3: 2, 4, 3, 2, 5, 2
      Movie 4: 2, 2, 3, 3, 1, 1
      Sign: 1=, 2+, 3=, 4-, 5+, 6+

  Each step is a copy or a comparison of tokens the line above holds at the same place (a table lookup in one
  step is what a small model did not learn: docs/guides/lm-lab.md). The question takes the first ``+``
  attribute and the first ``-`` one, in that order, so the first attribute favours the first movie; it is
  informative by construction (a pair that one movie dominates falls back to the locked question). Otherwise
  the *locked* question
  :data:`LOCKED_QUESTION`, the same salient comparison every turn (a repeat after its first time: AS -1,
  and no information), with the scratch ``ask``;
- update round: with probability ``update``, after a scheduled comparison, a real update: after "Yes" the
  first queried attribute's weight rises by :data:`STEP` and the second's falls, after "No" the reverse; the
  scratch names them (``no: 2 up 3 down``). Otherwise the *locked* update: the previous estimate again
  (BT 0), with the scratch ``update``.

The final answer is the last estimate. Low ``inform`` and ``update`` give the low-information regime the
paper calls self-locking; ``inform = update = 1`` a player that does the task (reward 0.6 on 200 rows,
against 0.9 for the Bayesian learner's queries, which no small model can compute from the text).
"""

from __future__ import annotations

import numpy as np

from arew.audit.runner import View
from arew_preference.env import PreferenceEnv
from arew_preference.prompts import item_row

LOCKED_QUESTION = (0, 1, (0, 1))  # movies 1 and 2 on attributes 1 and 2 (0-based)
STEP = 0.1
START = 0.5


def _numbers(w: np.ndarray) -> str:
    return ", ".join(f"{x:.1f}" for x in w)


def _sign_line(difference: np.ndarray) -> str:
    return "Sign: " + ", ".join(f"{k}{'+' if x > 0 else '-' if x < 0 else '='}" for k, x in enumerate(difference, 1))


class KnobPlayer:
    """One episode's scripted player (a :class:`arew.audit.runner.Policy`); ``seed`` draws its behaviours."""

    def __init__(self, inform: float, update: float, seed: int):
        for name, value in (("inform", inform), ("update", update)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: a probability in [0, 1], got {value!r}")
        self.inform, self.update = inform, update
        self.rng = np.random.default_rng(seed)
        self.w: np.ndarray | None = None
        self.asked: tuple[int, int, tuple[int, int]] = LOCKED_QUESTION  # this turn's query, as written
        self.scheduled = False  # whether it is an informative scheduled comparison (which may equal the locked one)

    def __call__(self, view: View) -> str:
        env: PreferenceEnv = view.env  # type: ignore[assignment]
        if self.w is None:
            self.w = np.full(env.n_attrs, START)
        if view.round == "act":
            scratch = self._question(env, view.turn)
            first, second, (up, down) = self.asked
            return f"<scratch>{scratch}</scratch><interact>{first + 1}, {second + 1} | {up + 1}, {down + 1}</interact>"
        if view.round == "update":
            scratch = "update"
            if self.rng.random() < self.update and self.scheduled and "User: " in view.feedback:
                scratch = self._update(view.feedback)
            return f"<scratch>{scratch}</scratch><interact>{_numbers(self.w)}</interact>"
        return f"<scratch>done</scratch><answer>{_numbers(self.w)}</answer>"

    def _question(self, env: PreferenceEnv, turn: int) -> str:
        """Set this turn's query; returns its scratch."""
        self.asked, self.scheduled = LOCKED_QUESTION, False
        if self.rng.random() >= self.inform:
            return "ask"
        first = turn % len(env.items)
        second = (first + 1) % len(env.items)
        difference = env.items[first] - env.items[second]
        if (difference > 0).any() and (difference < 0).any():
            self.asked = (first, second, (int(np.argmax(difference > 0)), int(np.argmax(difference < 0))))
            self.scheduled = True
        return "\n".join([item_row(first + 1, env.items[first]), item_row(second + 1, env.items[second]), _sign_line(difference)])

    def _update(self, feedback: str) -> str:
        """Move the estimate by the answer to the scheduled comparison; returns the scratch."""
        assert self.w is not None
        if "User: Equal" in feedback:
            return "equal"
        answer = "yes" if "User: Yes" in feedback else "no"
        up, down = self.asked[2] if answer == "yes" else self.asked[2][::-1]
        w = self.w.copy()
        w[up] += STEP
        w[down] -= STEP
        w = np.round(np.clip(w, 0.0, 1.0), 1)
        if w.any():
            self.w = w
        return f"{answer}: {up + 1} up {down + 1} down"
