"""The deterministic offline user: lexical matching (:mod:`arew.envs.lexical`), no model, no network.

- MediQ: each not-yet-revealed fact is scored by :func:`~arew.envs.lexical.coverage_scores`
  (the idf-weighted share of the question's terms the fact contains); the facts scoring at
  least ``fact_threshold`` are revealed, best first, at most ``max_facts``; ties go to the
  earlier fact.
- FloDial: each table row is scored by :func:`~arew.envs.lexical.similarity_scores`; the best
  row is the answer if it scores at least ``row_threshold`` and no other row does (so two
  rows tied above the threshold give Unknown too). A question that reaches two rows asks about more than one check, and its
  answer would not say which check it answers: it gets Unknown. Without this a question
  naming every check of the table (or two of them) was answered with the best-matching row's
  Yes/No and earned AS +1 (``arew_flodial.audit``, ``stuffing``). On the audit's tables, a
  question joining two to four checks of one table reaches a second row in 126 of 129 cases
  (runner-up scores 0.46-0.72), while a check asked in its own words scores at most 0.36
  against any other row of its table.

It serves CPU runs and tests, and is the LLM user's fallback.
"""

from __future__ import annotations

from arew.envs.lexical import coverage_scores, similarity_scores
from arew.envs.users.base import FactRequest, RowRequest, SimulatedUser, UserReply, UserRequest, count

FACT_THRESHOLD = 0.5
ROW_THRESHOLD = 0.5


def select_facts(request: FactRequest, threshold: float = FACT_THRESHOLD) -> tuple[int, ...]:
    candidates = [i for i in request.candidates if 0 <= i < len(request.facts)]
    scores = coverage_scores(request.question, [request.facts[i] for i in candidates])
    ranked = sorted((-score, i) for i, score in zip(candidates, scores, strict=True) if score >= threshold)
    return tuple(i for _, i in ranked[: max(0, request.max_facts)])


def select_row(request: RowRequest, threshold: float = ROW_THRESHOLD) -> tuple[int, ...]:
    if not request.rows:
        return ()
    scores = similarity_scores(request.question, request.rows)
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if scores[ranked[0]] < threshold or (len(ranked) > 1 and scores[ranked[1]] >= threshold):
        return ()  # nothing matches, or the question asks about several checks at once
    return (ranked[0],)


class OfflineUser(SimulatedUser):
    def __init__(self, fact_threshold: float = FACT_THRESHOLD, row_threshold: float = ROW_THRESHOLD):
        super().__init__()
        self.fact_threshold = float(fact_threshold)
        self.row_threshold = float(row_threshold)

    def answer(self, request: UserRequest) -> tuple[int, ...]:
        """The offline answer without touching any counter (the LLM user's fallback uses this)."""
        if isinstance(request, FactRequest):
            return select_facts(request, self.fact_threshold)
        if isinstance(request, RowRequest):
            return select_row(request, self.row_threshold)
        raise TypeError(f"unknown request type {type(request).__name__}")

    async def reply(self, request: UserRequest) -> UserReply:
        count(self.stats, "calls")
        return UserReply(self.answer(request), "offline")
