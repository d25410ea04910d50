"""PE rules as vectorised functions: the simulated user, informativeness, reward, replay.

One function, :func:`answer_signs`, serves both the simulated user and the Bayesian replay,
so the truth is never eliminated from the replay's posterior by rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envs.parsing import PairQuery

TIE_TOL = 1e-9
"""Weighted-sum differences below this are ties: float noise, never a real difference
(weights have two decimals and scores are integers, so real differences are >= 0.01)."""

BINARY_GAIN_THRESHOLD = 0.03
REFERENCE_THRESHOLD = 0.94
NEAR_COS = 0.97
REWARD_RULES = ("paper", "reference")
ANSWER_WORDS = {1: "Yes", -1: "No", 0: "Equal"}


def cosine(w: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of ``w`` (..., D) to ``target`` (D,); 0 for a zero row."""
    w = np.asarray(w, dtype=float)
    norms = np.linalg.norm(w, axis=-1) * np.linalg.norm(target)
    return np.divide(w @ target, norms, out=np.zeros(np.shape(norms)), where=norms > 0)


def masked_differences(items: np.ndarray, queries: Sequence[PairQuery]) -> np.ndarray:
    """(T, D): a_first - a_second on the queried attributes, 0 elsewhere."""
    diffs = np.zeros((len(queries), items.shape[1]))
    for row, q in enumerate(queries):
        attrs = list(q.attrs)
        diffs[row, attrs] = items[q.first, attrs] - items[q.second, attrs]
    return diffs


def answer_signs(weights: np.ndarray, diffs: np.ndarray) -> np.ndarray:
    """(K, T) user answers as signs (+1 Yes, -1 No, 0 Equal) for K weight vectors."""
    scores = np.atleast_2d(weights) @ np.atleast_2d(diffs).T
    return np.where(np.abs(scores) <= TIE_TOL, 0, np.sign(scores)).astype(int)


def is_informative(diffs: np.ndarray) -> np.ndarray:
    """(T,) neither item dominates on the queried attributes: the difference has both signs."""
    diffs = np.atleast_2d(diffs)
    return (diffs > 0).any(axis=1) & (diffs < 0).any(axis=1)


def outcome_reward(w: np.ndarray, w_star: np.ndarray, reward_kind: str, rule: str = "paper") -> float:
    """Reward of a final guess.

    ``rule="paper"`` (paper E.3.1): gain = cos(w, w*) - cos(0.5*1, w*). PE-G ("binary") pays
    1 iff gain > 0.03. PE-F ("continuous") pays gain / (1 - cos(0.5*1, w*)) clipped to [0, 1]:
    0 for no improvement over the default, 1 for the exact direction of w*.
    ``rule="reference"`` (the reference code): 1 iff (cos + 1) / 2 > 0.94.
    """
    sim = float(cosine(w, w_star))
    if rule == "reference":
        return float((sim + 1.0) / 2.0 > REFERENCE_THRESHOLD)
    if rule != "paper":
        raise ValueError(f"unknown reward rule {rule!r}; expected one of {REWARD_RULES}")
    base = float(cosine(np.full_like(w_star, 0.5), w_star))
    gain = sim - base
    if reward_kind == "binary":
        return float(gain > BINARY_GAIN_THRESHOLD)
    if reward_kind == "continuous":
        return float(np.clip(gain / (1.0 - base), 0.0, 1.0))
    raise ValueError(f"unknown reward kind {reward_kind!r}")


@dataclass(frozen=True)
class ReplayResult:
    """Exact Bayesian replay of the agent's queries (paper Def. 3.1 with Psi = mass on w*).

    ``mass_true[t]`` is the posterior mass on w* after t queries and ``mass_near[t]`` the
    mass within cosine :data:`NEAR_COS` of w*, a smoother version of the same quantity.
    """

    mass_true: np.ndarray
    mass_near: np.ndarray
    oracle_guess: np.ndarray

    @property
    def i_as(self) -> float:
        return float(self.mass_true[-1] - self.mass_true[0])

    @property
    def i_as_near(self) -> float:
        return float(self.mass_near[-1] - self.mass_near[0])


def bayes_replay(
    items: np.ndarray,
    w_star: np.ndarray,
    queries: Sequence[PairQuery],
    answers: Sequence[int],
    candidates: np.ndarray,
) -> ReplayResult:
    """Posterior over ``candidates`` plus w* (uniform prior) given deterministic answers.

    The user is a known deterministic function, so the update keeps exactly the candidates
    whose predicted answers match all observed ones; the oracle guess is the posterior mean.
    """
    pool = np.vstack([np.asarray(candidates, dtype=float).reshape(-1, len(w_star)), w_star])
    predicted = answer_signs(pool, masked_differences(items, queries))
    match = predicted == np.asarray(answers, dtype=int).reshape(1, -1)
    alive = np.hstack([np.ones((len(pool), 1), bool), np.logical_and.accumulate(match, axis=1)])
    n_alive = alive.sum(axis=0)
    near = cosine(pool, w_star) >= NEAR_COS
    return ReplayResult(
        mass_true=alive[-1] / n_alive,
        mass_near=(alive & near[:, None]).sum(axis=0) / n_alive,
        oracle_guess=pool[alive[:, -1]].mean(axis=0),
    )
