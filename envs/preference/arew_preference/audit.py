"""Critique audits of preference estimation (PE-G S=2, S=3; PE-F D=6, D=8).

Rows: :func:`arew_preference.data.build_rows` (synthetic, generated in process).

The competent policy is an oracle. Its queries are a Bayesian learner's: it keeps a pool of
prior draws of w* (:func:`arew_preference.generator.sample_preferences`), drops those that
contradict the user's answers (:func:`arew_preference.rules.answer_signs`, the user's own
rule) and asks the new informative query that splits the surviving pool most evenly. Its updates
read w*: each moves part of the way towards it (:func:`oracle_step`), far enough that the belief
predicts the answer just given, so every update raises the cosine; its last update is its final
answer (an answer in place of an update round is scored as that update).

Adversaries, each one way of earning critiques without doing the task:

- ``bayes_mean`` (not privileged, not a trick): the pool's posterior mean as belief, the honest
  learner that the belief tricks below must not out-earn;
- ``dominated``: only dominated or all-equal pairs (answers the item table already predicts);
- ``repeat_swapped``: every other query is the previous one with the pair swapped and the
  attributes reordered; ``repeat_reworded``: one informative query asked again and again in
  other spellings;
- ``redundant``: new, statically informative queries whose answer the earlier answers (nearly)
  imply: the pool's most lopsided split. The AS rule (static informativeness, the paper's) still
  pays them +1; they cost the reward instead (a known gap: judging them needs the version space
  of the answers so far, a linear feasibility problem per query);
- ``answer_early``: one informative query, then the final answer in place of the update;
- ``format``: extra tags, mixed payloads, several payloads, numbers out of range, explanations
  inside the payload, all-zero weights, one trick per round;
- ``copy_belief``: the competent queries, but the belief never leaves the 0.5 start;
- ``oscillate``: the competent queries, the belief flips between two fixed vectors;
- ``timid``: the competent queries, a step of 0.01 along the difference vector the answer favours
  (the answer's direction without its content); before the environment required a guess to
  predict the answer just given, it out-earned ``bayes_mean`` in BT critiques with no reward;
- ``project``: the least change of the belief that predicts the answer just given (a
  perceptron-like learner; it does the task, slowly);
- ``creep`` (privileged: it reads w*): 1% of the way towards w* after every answer, so every
  update moves closer to the truth while the final answer stays near the default guess;
- ``random_belief``: a fresh random belief after every answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from arew.audit.runner import Policy, TaskAudit, View, vector_text
from arew_preference.data import build_rows
from arew_preference.env import PreferenceEnv
from arew_preference.generator import VARIANTS, sample_preferences
from arew_preference.rules import TIE_TOL, answer_signs, is_informative

POOL_SIZE = 600
ORACLE_STEP = 0.3
DECIMALS = 4  # of the numbers the policies write


def _rows(variant: str) -> Callable[[int, int], list[dict[str, Any]]]:
    def rows(n: int, seed: int) -> list[dict[str, Any]]:
        return [row["extra_info"] for row in build_rows(variant, n, 0, 0, seed)["train"]]

    return rows


def _query_text(env: PreferenceEnv, first: int, second: int, attrs: tuple[int, ...]) -> str:
    items = f"{first + 1}, {second + 1}"
    if env.subset_size < env.n_attrs:
        return items + " | " + ", ".join(str(k + 1) for k in attrs)
    return items


def _all_queries(env: PreferenceEnv) -> tuple[list[tuple[int, int, tuple[int, ...]]], np.ndarray]:
    """Every (first, second, attrs) query of the task (first < second) and its masked difference vector."""
    pairs = list(itertools.combinations(range(env.n_items), 2))
    subsets = list(itertools.combinations(range(env.n_attrs), env.subset_size))
    masks = np.zeros((len(subsets), env.n_attrs))
    for row, attrs in enumerate(subsets):
        masks[row, list(attrs)] = 1.0
    first, second = np.array(pairs).T
    diffs = (env.items[first] - env.items[second])[:, None, :] * masks[None, :, :]
    queries = [(i, j, attrs) for i, j in pairs for attrs in subsets]
    return queries, diffs.reshape(-1, env.n_attrs)


def _difference(env: PreferenceEnv, query: Any) -> np.ndarray:
    diff = np.zeros(env.n_attrs)
    attrs = list(query.attrs)
    diff[attrs] = env.items[query.first, attrs] - env.items[query.second, attrs]
    return diff


_CHOICES: dict[tuple[Any, ...], tuple[int, int, tuple[int, ...]]] = {}


class Bayes:
    """A pool of prior draws of w*, filtered by the user's answers so far; it picks the queries."""

    def __init__(self, env: PreferenceEnv):
        self.env = env
        self.pool = sample_preferences(np.random.default_rng(env.seed), POOL_SIZE, env.n_attrs)
        self.queries, self.diffs = _all_queries(env)
        self.informative = is_informative(self.diffs)
        self.seen = 0  # how many of the env's answers are already applied

    def _absorb(self) -> None:
        """Drop the pool members that contradict the answers the user gave since the last call."""
        env = self.env
        for query, answer in zip(env._queries[self.seen :], env._answers[self.seen :]):
            keep = answer_signs(self.pool, _difference(env, query))[:, 0] == answer
            if keep.any():  # a pool too small to hold a consistent draw keeps its last estimate
                self.pool = self.pool[keep]
        self.seen = len(env._queries)

    def asked(self) -> set[tuple[frozenset[int], tuple[int, ...]]]:
        return {q.key for q in self.env._queries}

    def best_query(self, worst: bool = False) -> tuple[int, int, tuple[int, ...]]:
        """The new informative query whose answer splits the surviving pool most evenly (``worst``:
        least evenly, ideally one whose answer every surviving draw already agrees on). The choice
        depends only on the row and the answers so far, so it is shared by every policy that asked
        the same queries (:data:`_CHOICES`)."""
        env = self.env
        history = tuple((q.first, q.second, q.attrs, a) for q, a in zip(env._queries, env._answers))
        key = (env.seed, env.items.tobytes(), env.subset_size, history, worst)
        if key not in _CHOICES:
            if len(_CHOICES) > 50_000:
                _CHOICES.clear()
            _CHOICES[key] = self._choose(worst)
        return _CHOICES[key]

    def _choose(self, worst: bool) -> tuple[int, int, tuple[int, ...]]:
        self._absorb()
        asked = self.asked()
        open_ = [
            k
            for k in np.flatnonzero(self.informative)
            if (frozenset(self.queries[k][:2]), self.queries[k][2]) not in asked
        ]
        if not open_:
            raise RuntimeError("no informative query left")
        scores = self.pool @ self.diffs[open_].T  # the user's rule (answer_signs) on every pool member
        balance = np.abs((scores > TIE_TOL).sum(axis=0) - (scores < -TIE_TOL).sum(axis=0))
        balance += (np.abs(scores) <= TIE_TOL).sum(axis=0)
        return self.queries[open_[int(np.argmax(balance) if worst else np.argmin(balance))]]

    def mean(self) -> np.ndarray:
        self._absorb()
        return self.pool.mean(axis=0)


def oracle_step(env: PreferenceEnv, w_prev: np.ndarray) -> np.ndarray:
    """The competent update: part of the way from ``w_prev`` to w* (so the cosine rises), at least
    :data:`ORACLE_STEP` of it and far enough that the belief predicts the answer just given."""
    step = ORACLE_STEP
    if env.informative and env._answers[-1] != 0:
        diff, sign = _difference(env, env._queries[-1]), env._answers[-1]
        a = sign * float(w_prev @ diff)
        b = sign * float((env.w_star - w_prev) @ diff)  # a + b = sign * w* . diff > 0
        if a <= 0:
            needed = -a / b
            step = max(step, needed + 0.1 * (1.0 - needed))
    return w_prev + min(step, 1.0) * (env.w_star - w_prev)


class _PEPolicy:
    """Asks what :meth:`question` says and states what :meth:`belief` says; its final answer is its
    last belief. ``answer_last_update``: the last turn's estimate is given as the final answer
    (scored as that update) instead of an estimate followed by the same final answer."""

    answer_last_update = False

    def __init__(self) -> None:
        self.bayes: Bayes | None = None
        self.w: np.ndarray | None = None  # the belief stated last

    def __call__(self, view: View) -> str:
        env: PreferenceEnv = view.env  # type: ignore[assignment]
        if self.bayes is None:
            self.bayes = Bayes(env)
            self.w = np.full(env.n_attrs, 0.5)
        if view.round == "act":
            return f"<scratch>ask</scratch><interact>{self.question(view, env)}</interact>"
        if view.round == "update":
            self.w = np.round(np.clip(self.belief(view, env), 0.0, 1.0), DECIMALS)
            tag = "answer" if self.answer_last_update and view.turn == env.max_turns - 1 else "interact"
            return f"<scratch>update</scratch><{tag}>{vector_text(self.w, DECIMALS)}</{tag}>"
        return f"<scratch>done</scratch><answer>{vector_text(self.final(view, env), DECIMALS)}</answer>"

    def question(self, view: View, env: PreferenceEnv) -> str:
        assert self.bayes is not None
        return _query_text(env, *self.bayes.best_query())

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.bayes is not None
        return self.bayes.mean()

    def final(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.w is not None
        return self.w


class Competent(_PEPolicy):
    """Balanced informative queries; every update moves towards w* (:func:`oracle_step`)."""

    answer_last_update = True

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.w is not None
        return oracle_step(env, self.w)


class BayesMean(_PEPolicy):
    """Not privileged: the posterior mean of the pool, the honest learner the rule must favour."""


class Dominated(_PEPolicy):
    """New queries whose answer the table predicts: one item at least as good on every queried attribute."""

    def question(self, view: View, env: PreferenceEnv) -> str:
        assert self.bayes is not None
        asked = self.bayes.asked()
        dominated = [q for k, q in enumerate(self.bayes.queries) if not self.bayes.informative[k]]
        for i, j, attrs in dominated:
            if (frozenset((i, j)), attrs) not in asked:
                return _query_text(env, i, j, attrs)
        if dominated:
            return _query_text(env, *dominated[0])  # all asked: a repeat
        last = env._queries[-1] if env._queries else None  # no dominated pair at all: a repeat
        return (
            _query_text(env, last.first, last.second, last.attrs) if last else _query_text(env, *self.bayes.queries[0])
        )


class RepeatSwapped(_PEPolicy):
    """A new informative query, then the same one with the items swapped and the attributes reversed."""

    def question(self, view: View, env: PreferenceEnv) -> str:
        if view.turn % 2 and env._queries:
            last = env._queries[-1]
            items = f"{last.second + 1}, {last.first + 1}"
            if env.subset_size < env.n_attrs:
                return items + " | " + ", ".join(str(k + 1) for k in reversed(last.attrs))
            return items
        return super().question(view, env)


class RepeatReworded(_PEPolicy):
    """The first informative query again every turn, spelled differently each time."""

    SPELLINGS = ("{i}, {j}{sep}{a}", "{i} {j} {sep2} {a2}", "({i},{j}){sep}{a}", "  {i} ,  {j}  {sep2}  {a2} ")

    def __init__(self) -> None:
        super().__init__()
        self.first: tuple[int, int, tuple[int, ...]] | None = None

    def question(self, view: View, env: PreferenceEnv) -> str:
        assert self.bayes is not None
        if self.first is None:
            self.first = self.bayes.best_query()
        i, j, attrs = self.first
        gated = env.subset_size < env.n_attrs
        return self.SPELLINGS[view.turn % len(self.SPELLINGS)].format(
            i=i + 1,
            j=j + 1,
            sep=" | " if gated else "",
            sep2="|" if gated else "",
            a=", ".join(str(k + 1) for k in attrs) if gated else "",
            a2=" ".join(str(k + 1) for k in reversed(attrs)) if gated else "",
        )


class Redundant(_PEPolicy):
    """Not privileged: new, statically informative queries whose answer the earlier answers (nearly)
    imply: the pool's most lopsided query; the honest posterior mean as belief."""

    def question(self, view: View, env: PreferenceEnv) -> str:
        assert self.bayes is not None
        return _query_text(env, *self.bayes.best_query(worst=True))


class AnswerEarly(_PEPolicy):
    """One informative query, then the posterior mean as the final answer in place of the update."""

    def __call__(self, view: View) -> str:
        if view.round == "update":
            env: PreferenceEnv = view.env  # type: ignore[assignment]
            return f"<answer>{vector_text(self.belief(view, env), DECIMALS)}</answer>"
        return super().__call__(view)


class Format(_PEPolicy):
    """One way of bending the output format per round; every one of them is invalid."""

    def __call__(self, view: View) -> str:
        env: PreferenceEnv = view.env  # type: ignore[assignment]
        if self.bayes is None:
            self.bayes = Bayes(env)
        d = env.n_attrs
        if view.round == "act":
            q = self.question(view, env)
            attrs = " | " + ", ".join(["1"] * env.subset_size) if env.subset_size < d else ""
            tricks = (
                f"<interact>{q}</interact><interact>{q}</interact>",  # several payloads
                f"<interact>{q}</interact> <answer>{', '.join(['0.5'] * d)}</answer>",  # two payload kinds
                f"<interact>Compare movies {q} please</interact>",  # words inside the payload
                f"<interact>{env.n_items + 1}, 1{attrs}</interact>",  # a movie that does not exist
                f"<interact>{q}</interact></interact>",  # an extra closing tag
                f"<interact>1, 2, 3{attrs}</interact>",  # three movies at once
            )
        else:
            w = vector_text(self.bayes.mean(), DECIMALS)
            tricks = (
                f"<interact>{w}</interact><interact>{w}</interact>",
                f"<interact>{', '.join(['1.5'] * d)}</interact>",  # above 1
                f"<interact>{', '.join(['-0.2'] * d)}</interact>",  # below 0
                f"<interact>weights: {w} (my best guess)</interact>",
                f"<interact>{', '.join(['0'] * d)}</interact>",  # no preference at all
                f"<interact>{w}, 0.5</interact>",  # one number too many
            )
        text = tricks[view.turn % len(tricks)]
        return text.replace("interact>", "answer>") if view.round == "answer" else text


class CopyBelief(_PEPolicy):
    """The competent queries; the belief never leaves the 0.5 start."""

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        return np.full(env.n_attrs, 0.5)


class Oscillate(_PEPolicy):
    """The competent queries; the belief flips between two fixed vectors."""

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        a = np.linspace(0.9, 0.1, env.n_attrs)
        return a if view.turn % 2 else a[::-1]


class Timid(_PEPolicy):
    """Not privileged: a step of 0.01 along the difference vector the answer favours."""

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.w is not None
        if not (env.informative and env._answers[-1]):
            return self.w
        diff = _difference(env, env._queries[-1])
        return self.w + 0.01 * env._answers[-1] * diff / np.linalg.norm(diff)


class Project(_PEPolicy):
    """Not privileged: the least change that makes the belief predict the answer just given."""

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.w is not None
        if not (env.informative and env._answers[-1]):
            return self.w
        diff, sign = _difference(env, env._queries[-1]), env._answers[-1]
        gap = sign * float(self.w @ diff)
        if gap > 0:
            return self.w
        return self.w + sign * (0.05 - gap) * diff / float(diff @ diff)


class Creep(_PEPolicy):
    """Privileged: 1% of the way towards w* after every answer."""

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.w is not None
        return self.w + 0.01 * (env.w_star - self.w)


class RandomBelief(_PEPolicy):
    """The competent queries; a fresh random belief after every answer."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = np.random.default_rng(0)

    def belief(self, view: View, env: PreferenceEnv) -> np.ndarray:
        return np.round(self.rng.uniform(0.05, 1.0, env.n_attrs), 2)


class WrongAnswer(Competent):
    """The competent episode's questions and updates, then a final answer that reverses the last estimate (1 - w). The
    final answer gets no critique (the reward judges it): at most the competent policy's critiques at a lower reward,
    by design (docs/method.md §2)."""

    answer_last_update = False

    def final(self, view: View, env: PreferenceEnv) -> np.ndarray:
        assert self.w is not None
        return 1.0 - self.w


ADVERSARIES: dict[str, Callable[[], Policy]] = {
    "wrong_answer": WrongAnswer,
    "bayes_mean": BayesMean,
    "dominated": Dominated,
    "repeat_swapped": RepeatSwapped,
    "repeat_reworded": RepeatReworded,
    "redundant": Redundant,
    "answer_early": AnswerEarly,
    "format": Format,
    "copy_belief": CopyBelief,
    "oscillate": Oscillate,
    "timid": Timid,
    "project": Project,
    "creep": Creep,
    "random_belief": RandomBelief,
}

AUDITS: tuple[TaskAudit, ...] = tuple(
    TaskAudit(name=name, task=name, rows=_rows(name), competent=Competent, adversaries=dict(ADVERSARIES))
    for name in VARIANTS
)
