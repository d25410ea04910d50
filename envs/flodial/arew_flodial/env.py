"""FloDial as an :class:`~arew.envs.base.ActiveReasoningEnv`: find the fault among D candidates.

Episode (:mod:`arew_flodial.data`): the problem description and D = 5 candidate faults.
Each action round is a free-text yes/no question (:func:`arew.envs.parsing.parse_question`); the
simulated user (:mod:`arew.envs.users`) maps it to one row of the reference table (the gold
fault's path questions) and the environment answers that row's fixed Yes/No, or Unknown
when nothing matches; a row that was already answered gives Unknown (a repeat). Each update
round is D scores in [0, 1]; the starting belief is 1/D each. 10 turns. Reward 1 iff the
final vector's unique argmax is the gold candidate.

Critiques (paper E.3.1, docs/method.md §11):

- action (AS): Yes or No +1, Unknown (no match, repeated row) or invalid -1. The paper gives
  No 0; here a No counts as a Yes does, since either answer of a table row rules out the
  candidates whose path leaves the gold path there. With No at 0 the critique paid asking
  checks the user confirms over checks the user denies: in ``arew_flodial.audit`` a policy
  that asked only the rows answered Yes earned AS +1.00 against the competent policy's
  +0.42-0.52 and identified nothing (reward 0-0.13);
- update (BT): -1 for an invalid update (the previous belief is kept). After Yes/No: +1
  iff the gold candidate's score rose (w_t[gold] > w_prev[gold]), so did its share of
  all scores (w_t[gold] / sum(w_t) > w_prev[gold] / sum(w_prev), 1/D for an all-zero
  belief), *and* it moved toward the top: no candidate is above it after the update, or the
  best other candidate's lead over it shrank; else -1. The share and top conditions are
  additions to the paper's rule: without the share, raising every score (or setting every
  score to 1) earned +1 after every answer without knowing which candidate is the gold
  (``raise_all``, ``all_ones`` in the audit, reward 0); without the top, raising the gold's
  score and share while a decoy stays a step above it earned +1 after every answer and never
  named the gold (``decoy_on_top``, reward 0). A decoy whose lead shrinks by a hair at every
  update still earns +1: a rule turn by turn cannot tell it from a belief converging slowly.
  One exception, ``bt_saturation`` (default on): when the gold score was already 1 and stays
  1, and it is the only top score after the update, the update gets +1, since no rise is
  possible (off: no exception). After Unknown or an invalid question: +1 iff the belief is
  unchanged (every score within 1e-9), else -1;
- final answer (BT): -1 if invalid; in place of an update round it is scored as that
  update; otherwise 0.

Proxies: ``as`` = 1 for a Yes/No answer, else 0 (paper E.3.1: the query is uninformative
when the answer is Unknown); ``bt`` = w_t[gold] - w_prev[gold] per update round (0 when
invalid); scalars mirror PE plus answer counts, table coverage and the user's counters.

Options: the user options of :mod:`arew.envs.users`; ``feedback_ablation`` shows "Unknown" for
every answer while critiques and proxies use the true answers; ``bt_saturation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arew.envs import parsing, scoring
from arew.envs.base import StepResult
from arew.envs.beliefs import ChoiceEnv
from arew.envs.options import Option
from arew.envs.users import RowRequest, SimulatedUser, make_user, split_user_options
from arew_flodial import prompts

ANSWER_WORDS = ("Yes", "No")
AS_CRITIQUE = {"Yes": 1, "No": 1, "Unknown": -1}


class FloDialEnv(ChoiceEnv):
    prompts = prompts
    INVALID_FINAL = "Your final answer was invalid because {}. The session is over."
    INVALID_QUESTION = "Your question was invalid because {}. The user did not answer."

    TAKES_USER_OPTIONS = True
    OPTIONS = {
        "feedback_ablation": Option(bool, "show Unknown for every answer (Observation 3); critiques see the truth"),
        "bt_saturation": Option(bool, "BT +1 when the gold score is already 1, stays 1 and is the only top score (off: a gold score that cannot rise earns no +1)"),
    }

    def __init__(
        self,
        problem: str,
        candidates: Sequence[str],
        gold_idx: int,
        table_questions: Sequence[str],
        table_answers: Sequence[str],
        max_turns: int = 10,
        seed: int = 0,
        user: SimulatedUser | None = None,
        feedback_ablation: bool = False,
        bt_saturation: bool = True,
    ):
        self.problem = str(problem)
        self.candidates = [str(c) for c in candidates]
        self.n = len(self.candidates)
        if self.n < 2 or not 0 <= int(gold_idx) < self.n:
            raise ValueError("FloDial needs at least two candidates and a gold index among them")
        self.table_questions = tuple(str(q) for q in table_questions)
        self.table_answers = tuple(str(a).strip().capitalize() for a in table_answers)
        if len(self.table_questions) != len(self.table_answers) or set(self.table_answers) - set(ANSWER_WORDS):
            raise ValueError("the reference table needs one Yes/No answer per question")
        self.seed = int(seed)
        self.user = user if user is not None else make_user()
        self.feedback_ablation = bool(feedback_ablation)
        self.bt_saturation = bool(bt_saturation)
        super().__init__(max_turns, self.n, gold_idx)
        self._asked_rows: set[int] = set()
        self._counts = {"Yes": 0, "No": 0, "Unknown": 0}
        self._n_repeats = 0
        self._informative_updates = 0
        self._informative_rises = 0

    @classmethod
    def from_row(cls, extra_info: dict[str, Any], seed: int, **options: Any) -> FloDialEnv:
        user_options, rest = split_user_options(options)
        return cls(
            problem=extra_info["problem"],
            candidates=[str(c) for c in extra_info["candidates"]],
            gold_idx=int(extra_info["gold_idx"]),
            table_questions=[str(q) for q in extra_info["table_questions"]],
            table_answers=[str(a) for a in extra_info["table_answers"]],
            max_turns=int(extra_info.get("max_turns", 10)),
            seed=seed,
            user=make_user(**user_options),
            **rest,
        )

    @property
    def system_prompt(self) -> str:
        return prompts.system_prompt(self.n, self.max_turns)

    def opening(self) -> str:
        return prompts.task_text(self.problem, self.candidates)

    def _update_instruction(self) -> str:
        return prompts.update_instruction(self.n)

    def _answer_instruction(self) -> str:
        return prompts.answer_instruction(self.n)

    async def act(self, text: str, counterfactual: str | None = None) -> StepResult:
        query = self.open_turn(text, parsing.parse_question)
        if not query.ok:
            return self.invalid_question(query.error)
        question: str = query.value
        reply = await self.user.reply(RowRequest(question, self.table_questions, self.problem))
        row = next((i for i in reply.ids if 0 <= i < len(self.table_questions)), None)
        repeat = row is not None and row in self._asked_rows
        if row is None or repeat:
            word = "Unknown"
        else:
            word = self.table_answers[row]
            self._asked_rows.add(row)
        self._n_repeats += int(repeat)
        self._counts[word] += 1
        shown = "Unknown" if self.feedback_ablation else word
        return self.action_step(
            prompts.user_answer(shown),
            critique=AS_CRITIQUE[word],
            as_proxy=int(word != "Unknown"),
            news=word != "Unknown",
            question=question,
            row=None if row is None else row + 1,
            user_answer=word,
            repeat=repeat,
            user_source=reply.source,
            user_error=reply.error,
        )

    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        return float(w[self.gold] - prev[self.gold])

    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        prev = self.belief
        if not self.informative:
            return (1 if scoring.same(w, prev) else -1), "invariance"
        rose = delta > scoring.EQUAL_TOL
        share_rose = self._share(w) > self._share(prev) + scoring.EQUAL_TOL
        saturated = (
            self.bt_saturation
            and min(w[self.gold], prev[self.gold]) >= 1.0 - scoring.EQUAL_TOL
            and scoring.unique_argmax(w) == self.gold
        )
        self._informative_updates += 1
        self._informative_rises += int(rose)
        return (1 if (rose and share_rose and self._toward_top(w, prev)) or saturated else -1), "gold_rise"

    def _toward_top(self, w: np.ndarray, prev: np.ndarray) -> bool:
        """Whether the gold ends at the top (ties allowed) or the best other candidate's lead over it shrank."""

        def lead(v: np.ndarray) -> float:
            return float(np.max(np.delete(v, self.gold)) - v[self.gold])

        return lead(w) <= scoring.EQUAL_TOL or lead(w) < lead(prev) - scoring.EQUAL_TOL

    def _share(self, w: np.ndarray) -> float:
        """The gold candidate's share of all scores (1/D for an all-zero belief)."""
        total = float(np.sum(w))
        return float(w[self.gold]) / total if total > 0 else 1.0 / self.n

    def proxies(self) -> dict[str, Any]:
        rows = len(self.table_questions)
        return {
            **self.episode_proxies(),
            "n_informative": float(self._counts["Yes"] + self._counts["No"]),
            "n_yes": float(self._counts["Yes"]),
            "n_no": float(self._counts["No"]),
            "n_unknown": float(self._counts["Unknown"]),
            "n_repeats": float(self._n_repeats),
            "table_coverage": float(len(self._asked_rows) / rows) if rows else 0.0,
            "gold_score": float(self.belief[self.gold]),
            **self.choice_proxies(),
            "gold_rise_rate": (
                float(self._informative_rises / self._informative_updates) if self._informative_updates else 0.0
            ),
            **self.user.stats.as_dict("user_"),
        }
