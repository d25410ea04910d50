"""The number-search episode: ask "is it at most k?", keep scores over the candidates, name the secret.

Critiques (each computed from the answers so far, never from the agent's wording):

- question (AS): +1 iff k splits the numbers still consistent with the answers, so the answer
  is news whatever it is; -1 for a question that cannot change anything, or an invalid one;
- scores after news (BT): +1 iff every number the answers ruled out scores below every number
  still possible; -1 otherwise;
- scores after no news (BT): +1 iff the scores are unchanged; -1 otherwise;
- final answer: as a scores round if it takes one's place, else 0 (the reward judges it).

The reward is 1 when the unique top score is the secret. :class:`ChoiceEnv` keeps the turn
order, the belief bookkeeping and the proxies every task reports.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from arew.envs import parsing, scoring
from arew.envs.base import StepResult
from arew.envs.beliefs import ChoiceEnv
from arew_number_search import prompts

_WHOLE_NUMBER = re.compile(r"(?<![\w.])[0-9]{1,6}(?![\w]|\.[0-9])", re.ASCII)


def parse_threshold(payload: Any, n_candidates: int) -> parsing.ParseResult:
    """The k of "is it at most k?": the question's one whole number, between 1 and n - 1."""
    if not isinstance(payload, str) or len(payload) > parsing.MAX_QUESTION_CHARS:
        return parsing.ParseResult.failure(f"the question must be text of at most {parsing.MAX_QUESTION_CHARS} characters")
    numbers = _WHOLE_NUMBER.findall(payload)
    if len(numbers) != 1:
        return parsing.ParseResult.failure(f"the question must hold exactly one whole number, found {len(numbers)}")
    k = int(numbers[0])
    if not 1 <= k < n_candidates:
        return parsing.ParseResult.failure(f"k must lie between 1 and {n_candidates - 1}, got {k}")
    return parsing.ParseResult.success(k)


class NumberSearchEnv(ChoiceEnv):
    prompts = prompts
    INVALID_FINAL = "Your final answer was invalid because {}. The session is over."
    INVALID_QUESTION = "Your question was invalid because {}. The user did not answer."

    def __init__(self, secret: int, n_candidates: int = 8, max_turns: int = 4):
        if n_candidates < 2 or not 1 <= int(secret) <= n_candidates:
            raise ValueError("number search needs at least two candidates and a secret among them")
        super().__init__(max_turns, n_candidates, int(secret) - 1)
        self.n_candidates = int(n_candidates)
        self._low, self._high = 1, self.n_candidates  # the numbers still consistent with the answers

    @classmethod
    def from_row(cls, extra_info: dict[str, Any], seed: int, **options: Any) -> NumberSearchEnv:
        return cls(int(extra_info["secret"]), int(extra_info["n_candidates"]), int(extra_info["max_turns"]), **options)

    @property
    def system_prompt(self) -> str:
        return prompts.system_prompt(self.n_candidates, self.max_turns)

    def opening(self) -> str:
        return prompts.opening(self.n_candidates)

    async def act(self, text: str, counterfactual: str | None = None) -> StepResult:
        query = self.open_turn(text, lambda payload: parse_threshold(payload, self.n_candidates))
        if not query.ok:
            return self.invalid_question(query.error)
        k = query.value
        news = self._low <= k < self._high
        yes = self.gold + 1 <= k
        if news:
            self._low, self._high = (self._low, k) if yes else (k + 1, self._high)
        return self.action_step(prompts.user_answer("Yes" if yes else "No"), critique=1 if news else -1, as_proxy=int(news), news=news, k=k)

    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        return float(w[self.gold] - prev[self.gold])

    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        if not self.informative:
            return (1 if scoring.same(w, self.belief) else -1), "invariance"
        possible = np.zeros(self.n_candidates, dtype=bool)
        possible[self._low - 1 : self._high] = True
        respects = possible.all() or w[~possible].max() < w[possible].min()
        return (1 if respects else -1), "respects_answers"

    def proxies(self) -> dict[str, Any]:
        return {
            **self.episode_proxies(),
            **self.choice_proxies(),
            "n_possible": float(self._high - self._low + 1),
        }
