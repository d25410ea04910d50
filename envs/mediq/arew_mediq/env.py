"""MediQ as an :class:`~arew.envs.base.ActiveReasoningEnv`: ask a simulated patient, then answer A-D.

Episode: the agent sees the patient's opening complaint, the question and four options
(:mod:`arew_mediq.data`). Each action round is one free-text question
(:func:`arew.envs.parsing.parse_question`); the patient (:mod:`arew.envs.users`) reveals at most two
facts that answer it and were not revealed before, or says Unknown. Each update round is
four scores in [0, 1] for A-D; the starting belief is 0.25 each. 8 turns. Reward 1 iff the
final vector's unique argmax is the gold option.

Critiques (paper E.3.1, docs/method.md §11):

- action (AS): +1 iff new facts came back and the question is not a repeat; otherwise -1
  (Unknown, nothing new, repeat, invalid). A repeat has the content terms of an earlier
  valid question (:func:`arew.envs.lexical.question_key`: same words up to order, stop words
  and inflection).
- update (BT), with the margin m(w) = w[gold] - max_other w and w_prev the previous valid
  belief: -1 for an invalid update (the previous belief is kept). After uninformative
  feedback (no new fact, or an invalid question): +1 iff m(w_t) = m(w_prev), else -1.
  After informative feedback (new facts), the counterfactual check: ``update`` receives
  the agent's update generated from the pre-feedback context with
  :meth:`counterfactual_feedback` (the same message with the patient's answer replaced by
  "Unknown.") in place of the real feedback; +1 iff
  ||w_cf - w_prev|| <= ||w_t - w_prev|| (ties within 1e-9 count as <=), else -1. When that
  counterfactual is missing or not a valid 4-vector (in <interact> or <answer>), the
  critique is 0 and ``cf_missing`` counts it. Two additions to the paper's rule: a belief
  that moved without raising the gold margin (m(w_t) <= m(w_prev) + 1e-9; ``bt_rule``
  "margin_not_raised") gets -1, whatever the counterfactual (so a missing one does not turn it
  into 0), and a belief that did not move at all while its counterfactual did not either
  ("unmoved") gets 0, not +1. The counterfactual check alone pays any
  move, in any direction, that is larger than the move the same agent makes on "Unknown.":
  copying the previous belief (0 <= 0), a random move, raising every score, or pushing the
  option it already favours all earned +1 after every new fact, exactly as often as raising
  the gold option (``arew_mediq.audit``: ``copy_belief``, ``random_move``, ``raise_all``,
  ``raise_top`` and ``oscillate`` tied the competent policy with rewards of 0 to 0.4). The
  margin is the paper's BT proxy for MediQ, so +1 now also requires BT_t > 0.
- final answer (BT): -1 if invalid; when it takes the place of an update round it is
  scored as that update, except that after informative feedback no counterfactual reaches
  ``answer`` and the critique is 0; otherwise 0.
- counterfactual AS (the paper's optional variant, off by default: ``counterfactual_as``):
  from the second action round on, :meth:`counterfactual_belief` asks the loop to regenerate
  the question with the agent's latest belief replaced by the uniform prior; when the
  regenerated question's content terms overlap the real one's by at least
  ``cf_as_max_overlap`` (Jaccard, :func:`arew.envs.lexical.terms`), the question did not depend on
  the belief and the action gets -1. A missing or invalid counterfactual question leaves the
  critique as it is and is counted (``cf_as_missing``).

Proxies (paper 2.2): ``as`` = number of facts newly revealed per action round, ``bt`` =
m(w_t) - m(w_prev) per update round (0 when invalid); scalars mirror PE (reward, answered,
final_equals_first_guess, ...) plus fact coverage and the user's counters (``user_*``).

Options: the user options of :mod:`arew.envs.users` (``user="offline"`` by default);
``feedback_ablation`` shows "Unknown." for every answer while critiques and proxies still
use the true answers (docs/method.md §10, Observation 3); ``max_facts`` (2) per answer;
``counterfactual_as`` (False) and ``cf_as_max_overlap`` (0.7) for the counterfactual AS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arew.envs import parsing, scoring
from arew.envs.base import StepResult
from arew.envs.beliefs import ChoiceEnv
from arew.envs.lexical import question_key, terms
from arew.envs.options import Option
from arew.envs.users import FactRequest, SimulatedUser, make_user, split_user_options
from arew_mediq import prompts

N_OPTIONS = 4


class MediQEnv(ChoiceEnv):
    prompts = prompts
    INVALID_FINAL = "Your final answer was invalid because {}. The consultation is over."
    INVALID_QUESTION = "Your question was invalid because {}. The patient did not answer."

    TAKES_USER_OPTIONS = True
    OPTIONS = {
        "feedback_ablation": Option(bool, "show Unknown for every answer (Observation 3); critiques see the truth"),
        "max_facts": Option(int, "facts the patient reveals per answer at most", low=1),
        "counterfactual_as": Option(bool, "regenerate each question with the belief reset; -1 when it does not change"),
        "cf_as_max_overlap": Option(float, "word overlap above which the regenerated question counts as unchanged", low=0.0, high=1.0),
    }

    def __init__(
        self,
        initial_info: str,
        question: str,
        options: Sequence[str],
        answer_idx: int,
        facts: Sequence[str],
        known_fact_ids: Sequence[int] = (),
        max_turns: int = 8,
        seed: int = 0,
        user: SimulatedUser | None = None,
        feedback_ablation: bool = False,
        max_facts: int = 2,
        counterfactual_as: bool = False,
        cf_as_max_overlap: float = 0.7,
    ):
        self.initial_info = str(initial_info)
        self.question = str(question)
        self.options = [str(o) for o in options]
        if len(self.options) != N_OPTIONS or not 0 <= int(answer_idx) < N_OPTIONS:
            raise ValueError("MediQ needs four options and a gold index in 0..3")
        self.facts = tuple(str(f) for f in facts)
        self.known = frozenset(int(i) for i in known_fact_ids if 0 <= int(i) < len(self.facts))
        self.seed = int(seed)
        self.user = user if user is not None else make_user()
        self.feedback_ablation = bool(feedback_ablation)
        self.max_facts = int(max_facts)
        self.counterfactual_as = bool(counterfactual_as)
        self.cf_as_max_overlap = float(cf_as_max_overlap)
        super().__init__(max_turns, N_OPTIONS, answer_idx)
        self._revealed: set[int] = set(self.known)
        self._keys: list[Any] = []
        self._cf_text: str | None = None
        self._n_repeats = 0
        self._n_informative = 0
        self._cf_checks = 0
        self._cf_missing = 0
        self._cf_as_checks = 0
        self._cf_as_missing = 0
        self._cf_as_copies = 0

    @classmethod
    def from_row(cls, extra_info: dict[str, Any], seed: int, **options: Any) -> MediQEnv:
        user_options, rest = split_user_options(options)
        return cls(
            initial_info=extra_info["initial_info"],
            question=extra_info["question"],
            options=[str(o) for o in extra_info["options"]],
            answer_idx=int(extra_info["answer_idx"]),
            facts=[str(f) for f in extra_info["facts"]],
            known_fact_ids=[int(i) for i in extra_info.get("known_fact_ids", [])],
            max_turns=int(extra_info.get("max_turns", 8)),
            seed=seed,
            user=make_user(**user_options),
            **rest,
        )

    @property
    def system_prompt(self) -> str:
        return prompts.system_prompt(self.max_turns)

    def opening(self) -> str:
        return prompts.case_text(self.initial_info, self.question, self.options)

    def counterfactual_feedback(self) -> str | None:
        return self._cf_text if self.phase == "update" else None

    def counterfactual_belief(self) -> str | None:
        if not (self.counterfactual_as and self.phase == "act" and self.turn > 0):
            return None
        return "<interact>" + ", ".join(["0.25"] * N_OPTIONS) + "</interact>"

    def _belief_independent(self, question: str, counterfactual: str | None) -> bool | None:
        """Whether the question survives replacing the belief (None: no usable counterfactual)."""
        if not self.counterfactual_as or self.turn <= 1:
            return None
        self._cf_as_checks += 1
        payload = parsing.extract_payload(counterfactual, "interact")
        parsed = parsing.parse_question(payload.value) if payload.ok else payload
        if not parsed.ok:
            self._cf_as_missing += 1
            return None
        real, alternative = terms(question), terms(parsed.value)
        union = real | alternative
        overlap = len(real & alternative) / len(union) if union else 1.0
        copied = overlap >= self.cf_as_max_overlap
        self._cf_as_copies += int(copied)
        return copied

    async def act(self, text: str, counterfactual: str | None = None) -> StepResult:
        query = self.open_turn(text, parsing.parse_question)
        self._cf_text = None
        if not query.ok:
            return self.invalid_question(query.error)
        question: str = query.value
        key = question_key(question)
        repeat = key in self._keys
        self._keys.append(key)
        self._n_repeats += int(repeat)
        open_ids = tuple(i for i in range(len(self.facts)) if i not in self._revealed)
        source, error = "none", None
        new: list[int] = []
        if open_ids:
            reply = await self.user.reply(FactRequest(question, self.facts, open_ids, self.max_facts))
            source, error = reply.source, reply.error
            new = [i for i in dict.fromkeys(reply.ids) if i in open_ids][: self.max_facts]
        self._revealed.update(new)
        belief_independent = self._belief_independent(question, counterfactual)
        good = bool(new) and not repeat and not belief_independent
        self._n_informative += int(bool(new) and not repeat)
        shown = [] if self.feedback_ablation else [self.facts[i] for i in new]
        if new:
            self._cf_text = prompts.patient_answer([]) + "\n" + prompts.update_instruction()
        return self.action_step(
            prompts.patient_answer(shown),
            critique=1 if good else -1,
            as_proxy=len(new),
            news=bool(new),
            question=question,
            new_fact_ids=[i + 1 for i in new],
            informative=bool(new),
            repeat=repeat,
            belief_independent=belief_independent,
            user_source=source,
            user_error=error,
        )

    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        return scoring.margin(w, self.gold) - scoring.margin(prev, self.gold)

    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        if not self.informative:
            return (1 if scoring.same(delta, 0.0) else -1), "invariance"
        if role == "answer":
            return 0, "no_counterfactual"
        kind = parsing.payload_kind(counterfactual) if counterfactual is not None else None
        cf = self.parse_belief(counterfactual, kind) if kind else parsing.ParseResult.failure("missing")
        self._cf_checks += int(cf.ok)
        self._cf_missing += int(not cf.ok)
        prev = self.belief
        d_t = float(np.linalg.norm(w - prev))
        if d_t > scoring.EQUAL_TOL and delta <= scoring.EQUAL_TOL:
            return -1, "margin_not_raised"  # needs no counterfactual
        if not cf.ok:
            return 0, "counterfactual_missing"
        d_cf = float(np.linalg.norm(np.asarray(cf.value) - prev))
        if d_cf > d_t + scoring.EQUAL_TOL:
            return -1, "counterfactual"
        if d_t <= scoring.EQUAL_TOL:
            return 0, "unmoved"
        return 1, "counterfactual"

    def proxies(self) -> dict[str, Any]:
        open_total = len(self.facts) - len(self.known)
        revealed = len(self._revealed) - len(self.known)
        return {
            **self.episode_proxies(),
            "n_informative": float(self._n_informative),
            "n_repeats": float(self._n_repeats),
            "facts_revealed": float(revealed),
            "fact_coverage": float(revealed / open_total) if open_total else 0.0,
            "margin_belief": scoring.margin(self.belief, self.gold),
            **self.choice_proxies(),
            "cf_checks": float(self._cf_checks),
            "cf_missing": float(self._cf_missing),
            "cf_as_checks": float(self._cf_as_checks),
            "cf_as_missing": float(self._cf_as_missing),
            "cf_as_belief_independent": float(self._cf_as_copies),
            **self.user.stats.as_dict("user_"),
        }
