"""Preference estimation (PE-G, PE-F) as an :class:`~arew.envs.base.ActiveReasoningEnv`.

Critiques (paper E.3.1, docs/method.md §11):

- action round (AS): +1 iff the query is valid, new (its unordered pair and attribute set
  were not asked before) and informative (the pair's score difference on the queried
  attributes has both signs); otherwise -1. Informativeness is judged from the item table
  alone, as in the paper: a new query whose answer the earlier answers already imply still
  earns +1 (``arew_preference.audit``, ``redundant``; telling them apart needs the set of
  weights consistent with every answer so far, a linear feasibility check per query);
- update round (BT): -1 for an invalid guess, which leaves the previous valid guess in
  place; otherwise, after an AS=+1 query, the sign of cos(w_t, w*) - cos(w_prev, w*)
  against the previous valid guess (0 when equal within 1e-12), and 0 after an AS=-1 query;
  one addition to the paper's rule: a guess that moved closer to w* but does not predict the
  answer just given (its weighted sums on the queried attributes do not order the pair the
  way the user did; no check after an "Equal") gets -1, not +1. Without it the sign rule
  paid a tiny step along the difference vector the answer favours more than a real update:
  in ``arew_preference.audit`` (8 rows per variant) that step (``timid``) earned BT +0.38 to
  +0.52 and no reward, the posterior mean of a Bayesian learner BT +0.05 to +0.22 (even the
  exact posterior mean raises the cosine in only about two updates of three). The posterior
  mean always predicts the latest answer (it lies in the convex set of weights that do), so
  the addition costs it nothing;
- final answer (BT): -1 if invalid; if it takes the place of an update round it is scored
  as that update; otherwise 0, since the outcome reward already judges it.

Proxies (paper 2.2): ``as`` holds AS_t = 1 iff the action critique is +1 (a repeated
informative query adds no information), ``bt`` holds BT_t = cos(w_t, w*) - cos(w_prev, w*),
0 for an invalid guess. The starting belief is 0.5 on every attribute.

Options: ``reward_rule`` "paper" (default) or "reference" (see :func:`outcome_reward`);
``feedback_ablation`` makes the user always answer "Unknown" (docs/method.md §10, Observation
3: critiques and the replay still use the true answers); ``replay_samples`` is the number
of prior draws in the Bayesian replay behind the I_AS and oracle diagnostics (2000, as in
``arew lab``).

Diagnostics (docs/method.md §10): ``i_as_nats`` is I_AS (Def. 3.1) as the information the
answers carried about w* in nats, log of the replay's posterior-to-prior mass on w*, which
does not depend on the number of replay draws (see :class:`~arew_preference.rules.ReplayResult`;
it replaces ``i_as``, the pool-dependent difference of masses); ``oracle_cos`` and
``oracle_reward`` score the replay's posterior mean; ``c_bt`` (Def. 3.2) sums the positive
cosine steps from the start to the final answer; ``final_equals_first_guess`` (Observation
3) is 1 iff the final answer is the first valid estimate (every weight within
:func:`numpy.allclose`'s tolerance).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arew.envs import parsing
from arew.envs.base import StepResult
from arew.envs.beliefs import BeliefEnv
from arew.envs.options import Option
from arew_preference import prompts
from arew_preference.generator import ATTRIBUTE_NAMES, sample_preferences
from arew_preference.rules import (
    ANSWER_WORDS,
    REWARD_RULES,
    answer_signs,
    bayes_replay,
    cosine,
    is_informative,
    masked_differences,
    outcome_reward,
)

BT_EQUAL_TOL = 1e-12


def _matrix(value: Any) -> np.ndarray:
    """Nested lists, or the object arrays of arrays that parquet readers return, as 2-D floats."""
    return np.stack([np.asarray(row, dtype=float) for row in value])


class PreferenceEnv(BeliefEnv):
    prompts = prompts
    RECORDED = "Estimate recorded."
    INVALID_BELIEF = "Your estimate was invalid because {}. Your previous valid estimate is kept."
    FINAL_RECORDED = "Final estimate recorded."
    INVALID_FINAL = "Your final answer was invalid because {}. The game is over."
    INVALID_QUESTION = "Your question was invalid because {}. The user did not answer."

    OPTIONS = {
        "reward_rule": Option(str, "paper (the paper's reward) or reference (the reference code's)", choices=REWARD_RULES),
        "feedback_ablation": Option(bool, "show Unknown for every answer (Observation 3); critiques see the truth"),
        "replay_samples": Option(int, "prior draws of the Bayesian replay behind the I_AS and oracle diagnostics", low=1),
    }

    def __init__(
        self,
        items: Sequence[Sequence[float]],
        w_star: Sequence[float],
        subset_size: int,
        max_turns: int,
        reward_kind: str,
        attribute_names: Sequence[str] | None = None,
        seed: int = 0,
        reward_rule: str = "paper",
        feedback_ablation: bool = False,
        replay_samples: int = 2000,
    ):
        if reward_rule not in REWARD_RULES:
            raise ValueError(f"reward_rule must be one of {REWARD_RULES}, got {reward_rule!r}")
        self.items = _matrix(items)
        self.w_star = np.asarray(w_star, dtype=float)
        self.n_items, self.n_attrs = self.items.shape
        if self.w_star.shape != (self.n_attrs,) or not 1 < subset_size <= self.n_attrs:
            raise ValueError("w_star must have one weight per attribute and 1 < subset_size <= D")
        self.subset_size = int(subset_size)
        self.reward_kind = reward_kind
        self.attribute_names = list(attribute_names or ATTRIBUTE_NAMES[: self.n_attrs])
        self.seed = int(seed)
        self.reward_rule = reward_rule
        self.feedback_ablation = bool(feedback_ablation)
        self.replay_samples = int(replay_samples)
        super().__init__(max_turns, np.full(self.n_attrs, 0.5))
        self._queries: list[parsing.PairQuery] = []
        self._answers: list[int] = []
        self._latest: tuple[np.ndarray, int] | None = None  # the latest query's difference and answer

    @classmethod
    def from_row(cls, extra_info: dict[str, Any], seed: int, **options: Any) -> PreferenceEnv:
        return cls(
            items=extra_info["items"],
            w_star=extra_info["w_star"],
            subset_size=int(extra_info["subset_size"]),
            max_turns=int(extra_info["max_turns"]),
            reward_kind=str(extra_info["reward_kind"]),
            attribute_names=[str(name) for name in extra_info["attribute_names"]],
            seed=seed,
            **options,
        )

    @property
    def system_prompt(self) -> str:
        return prompts.system_prompt(self.n_items, self.attribute_names, self.subset_size, self.max_turns)

    def opening(self) -> str:
        return prompts.item_table(self.items.astype(int), self.attribute_names)

    async def act(self, text: str, counterfactual: str | None = None) -> StepResult:
        query = self.open_turn(
            text, lambda payload: parsing.parse_pair_query(payload, self.n_items, self.n_attrs, self.subset_size)
        )
        if not query.ok:
            return self.invalid_question(query.error)
        q: parsing.PairQuery = query.value
        diff = masked_differences(self.items, [q])
        repeat = any(q.key == earlier.key for earlier in self._queries)
        informative = bool(is_informative(diff)[0])
        sign = int(answer_signs(self.w_star, diff)[0, 0])
        self._latest = (diff, sign)
        self._queries.append(q)
        self._answers.append(sign)
        good = informative and not repeat
        word = "Unknown" if self.feedback_ablation else ANSWER_WORDS[sign]
        scope = (
            "attributes " + ", ".join(str(k + 1) for k in q.attrs)
            if self.subset_size < self.n_attrs
            else "all attributes"
        )
        asked = f"You asked whether the user prefers movie {q.first + 1} to movie {q.second + 1} on {scope}"
        return self.action_step(
            f"{asked}. User: {word}.",
            critique=1 if good else -1,
            as_proxy=int(good),
            news=good,
            query=[q.first + 1, q.second + 1, [k + 1 for k in q.attrs]],
            user_answer=word,
            informative=informative,
            repeat=repeat,
        )

    def parse_belief(self, text: Any, tag: str) -> parsing.ParseResult:
        guess = super().parse_belief(text, tag)
        if guess.ok and not any(guess.value):
            return parsing.ParseResult.failure("all weights are zero, which states no preference")
        return guess

    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        return float(cosine(w, self.w_star) - cosine(prev, self.w_star))

    def predicts_latest_answer(self, w: np.ndarray) -> bool:
        """Whether weights ``w`` order the latest queried pair as the user did (True after "Equal")."""
        if self._latest is None:
            return True
        diff, sign = self._latest
        return sign == 0 or int(answer_signs(np.asarray(w, dtype=float), diff)[0, 0]) == sign

    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        if not self.informative or abs(delta) <= BT_EQUAL_TOL:
            return 0, "cosine"
        if delta > 0 and not self.predicts_latest_answer(w):
            return -1, "contradicts_answer"
        return int(np.sign(delta)), "cosine"

    def reward(self) -> float:
        if self.final_belief is None:
            return 0.0
        return outcome_reward(self.final_belief, self.w_star, self.reward_kind, self.reward_rule)

    def proxies(self) -> dict[str, Any]:
        rng = np.random.default_rng(self.seed)
        candidates = sample_preferences(rng, self.replay_samples, self.n_attrs)
        replay = bayes_replay(self.items, self.w_star, self._queries, self._answers, candidates)
        consistent = (
            self.final_belief is not None
            and self.first_guess is not None
            and np.allclose(self.final_belief, self.first_guess)
        )
        return {
            **self.episode_proxies(),
            "cos_initial": float(cosine(np.full(self.n_attrs, 0.5), self.w_star)),
            "cos_belief": float(cosine(self.belief, self.w_star)),
            "n_informative": float(sum(self.as_proxies)),
            "final_equals_first_guess": float(consistent),
            "i_as_nats": replay.info_gain,
            "oracle_cos": float(cosine(replay.oracle_guess, self.w_star)),
            "oracle_reward": outcome_reward(
                replay.oracle_guess, self.w_star, self.reward_kind, self.reward_rule
            ),
        }
