"""Scripted PE-G players (two attributes a question) whose question informativeness and belief-update quality are knobs: the
transcripts a small language model is fine-tuned on before RL (``arew lm-lab``).

Each decision is one of two behaviours, drawn independently:

- question round: with probability ``inform`` the Bayesian learner's new informative query
  (:meth:`arew_preference.audit.Bayes.best_query`), its attributes written so that the first one
  favours the first movie; otherwise the *locked* question :data:`LOCKED_QUESTION`, the same
  salient comparison every turn (a repeat after its first time: AS -1, and no information);
- update round: with probability ``update`` a real update that needs only the turn's own text:
  after "Yes" the first queried attribute's weight rises by :data:`STEP` and the second's falls,
  after "No" the reverse (the query's order says which attribute favoured the first movie);
  otherwise the *locked* update: the previous estimate again (BT 0).

The final answer is the last estimate. Low ``inform`` and ``update`` give the low-information
regime the paper calls self-locking; ``inform = update = 1`` a player that does the task with
rules a small model can learn from text alone.
"""

from __future__ import annotations

import numpy as np

from arew.audit.runner import View
from arew_preference.audit import Bayes
from arew_preference.env import PreferenceEnv

LOCKED_QUESTION = (0, 1, (0, 1))  # movies 1 and 2 on attributes 1 and 2 (0-based)
STEP = 0.1
START = 0.5


def _numbers(w: np.ndarray) -> str:
    return ", ".join(f"{x:.1f}" for x in w)


class KnobPlayer:
    """One episode's scripted player (a :class:`arew.audit.runner.Policy`); ``seed`` draws its behaviours."""

    def __init__(self, inform: float, update: float, seed: int):
        for name, value in (("inform", inform), ("update", update)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: a probability in [0, 1], got {value!r}")
        self.inform, self.update = inform, update
        self.rng = np.random.default_rng(seed)
        self.bayes: Bayes | None = None
        self.w: np.ndarray | None = None
        self.asked: tuple[int, int, tuple[int, ...]] | None = None  # this turn's query, as written

    def __call__(self, view: View) -> str:
        env: PreferenceEnv = view.env  # type: ignore[assignment]
        if self.bayes is None:
            self.bayes, self.w = Bayes(env), np.full(env.n_attrs, START)
        if view.round == "act":
            self.asked = self._question(env)
            first, second, attrs = self.asked
            return f"<scratch>ask</scratch><interact>{first + 1}, {second + 1} | {', '.join(str(k + 1) for k in attrs)}</interact>"
        if view.round == "update":
            if self.rng.random() < self.update:
                self.w = self._updated(env, view.feedback)
            return f"<scratch>update</scratch><interact>{_numbers(self.w)}</interact>"
        return f"<scratch>done</scratch><answer>{_numbers(self.w)}</answer>"

    def _question(self, env: PreferenceEnv) -> tuple[int, int, tuple[int, ...]]:
        assert self.bayes is not None
        if self.rng.random() >= self.inform:
            return LOCKED_QUESTION
        try:
            first, second, attrs = self.bayes.best_query()
        except RuntimeError:  # every informative query asked
            return LOCKED_QUESTION
        favours_first = env.items[first, list(attrs)] > env.items[second, list(attrs)]
        return first, second, tuple(sorted(attrs, key=lambda k: not favours_first[list(attrs).index(k)]))

    def _updated(self, env: PreferenceEnv, feedback: str) -> np.ndarray:
        assert self.w is not None and self.asked is not None
        if self.asked == LOCKED_QUESTION or "User: Equal" in feedback or "User: " not in feedback:
            return self.w
        sign = 1.0 if "User: Yes" in feedback else -1.0
        up, down = self.asked[2]
        w = self.w.copy()
        w[up] += sign * STEP
        w[down] -= sign * STEP
        w = np.round(np.clip(w, 0.0, 1.0), 1)
        return w if w.any() else self.w
