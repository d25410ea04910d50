"""MediQ as an :class:`~envs.base.ActiveReasoningEnv`: ask a simulated patient, then answer A-D.

Episode: the agent sees the patient's opening complaint, the question and four options
(:mod:`envs.mediq.data`). Each action round is one free-text question
(:func:`envs.parsing.parse_question`); the patient (:mod:`envs.users`) reveals at most two
facts that answer it and were not revealed before, or says Unknown. Each update round is
four scores in [0, 1] for A-D; the starting belief is 0.25 each. 8 turns. Reward 1 iff the
final vector's unique argmax is the gold option.

Critiques (paper E.3.1, SPEC section 3):

- action (AS): +1 iff new facts came back and the question is not a repeat; otherwise -1
  (Unknown, nothing new, repeat, invalid). A repeat has the content terms of an earlier
  valid question (:func:`envs.lexical.question_key`: same words up to order, stop words
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
  critique is 0 and ``cf_missing`` counts it.
- final answer (BT): -1 if invalid; when it takes the place of an update round it is
  scored as that update, except that after informative feedback no counterfactual reaches
  ``answer`` and the critique is 0; otherwise 0.
- counterfactual AS (the paper's optional variant: regenerate the query from an intervened
  belief, -1 when it overlaps the real query) is not implemented: the protocol has no hook
  for a counterfactual *action* (only :meth:`counterfactual_feedback`, before an update),
  and the paper reports it as an exploration, not part of the main recipe.

Proxies (paper 2.2): ``as`` = number of facts newly revealed per action round, ``bt`` =
m(w_t) - m(w_prev) per update round (0 when invalid); scalars mirror PE (reward, answered,
final_equals_first_guess, ...) plus fact coverage and the user's counters (``user_*``).

Options: the user options of :mod:`envs.users` (``user="offline"`` by default);
``feedback_ablation`` shows "Unknown." for every answer while critiques and proxies still
use the true answers (SPEC section 4, Observation 3); ``max_facts`` (2) per answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envs import parsing, scoring
from envs.base import ActiveReasoningEnv, Channel, StepResult
from envs.lexical import question_key
from envs.mediq import prompts
from envs.users import FactRequest, SimulatedUser, make_user, split_user_options

N_OPTIONS = 4
INFORMATIVE, UNINFORMATIVE = "informative", "uninformative"


def _belief_from(text: Any, tag: str) -> parsing.ParseResult:
    payload = parsing.extract_payload(text, tag)
    return payload if not payload.ok else parsing.parse_vector(payload.value, N_OPTIONS)


class MediQEnv(ActiveReasoningEnv):
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
    ):
        self.initial_info = str(initial_info)
        self.question = str(question)
        self.options = [str(o) for o in options]
        if len(self.options) != N_OPTIONS or not 0 <= int(answer_idx) < N_OPTIONS:
            raise ValueError("MediQ needs four options and a gold index in 0..3")
        self.gold = int(answer_idx)
        self.facts = tuple(str(f) for f in facts)
        self.known = frozenset(int(i) for i in known_fact_ids if 0 <= int(i) < len(self.facts))
        self.max_turns = int(max_turns)
        self.seed = int(seed)
        self.user = user if user is not None else make_user()
        self.feedback_ablation = bool(feedback_ablation)
        self.max_facts = int(max_facts)

        self._phase = "act"
        self._turn = 0
        self._revealed: set[int] = set(self.known)
        self._keys: list[Any] = []
        self._pending = UNINFORMATIVE
        self._cf_text: str | None = None
        self._belief = np.full(N_OPTIONS, 1.0 / N_OPTIONS)
        self._first_guess: np.ndarray | None = None
        self._final: np.ndarray | None = None
        self._as: list[int] = []
        self._bt: list[float] = []
        self._n_invalid = 0
        self._n_repeats = 0
        self._n_informative = 0
        self._cf_checks = 0
        self._cf_missing = 0

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
    def phase(self) -> str:
        """Which call the episode expects next: "act", "update", "answer" or "done"."""
        return self._phase

    @property
    def system_prompt(self) -> str:
        return prompts.system_prompt(self.max_turns)

    def initial_messages(self) -> list[dict[str, str]]:
        case = prompts.case_text(self.initial_info, self.question, self.options)
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": case + "\n\n" + prompts.query_instruction(0, self.max_turns)},
        ]

    def final_turn_notice(self) -> str:
        return prompts.final_turn_notice()

    def counterfactual_feedback(self) -> str | None:
        return self._cf_text

    def _expect(self, *phases: str) -> None:
        if self._phase not in phases:
            raise RuntimeError(f"episode expects {self._phase!r} next, not {phases[0]!r}")

    async def act(self, text: str) -> StepResult:
        self._expect("act")
        self._turn += 1
        self._phase = "update"
        self._cf_text = None
        payload = parsing.extract_payload(text, "interact")
        query = payload if not payload.ok else parsing.parse_question(payload.value)
        if not query.ok:
            self._n_invalid += 1
            self._pending = UNINFORMATIVE
            self._as.append(0)
            feedback = f"Your question was invalid because {query.error}. The patient did not answer."
            return StepResult(
                feedback=feedback + "\n" + prompts.update_instruction(),
                critique=-1,
                channel=Channel.AS,
                valid=False,
                info={"turn": self._turn, "error": query.error, "as_proxy": 0},
            )
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
        good = bool(new) and not repeat
        self._n_informative += int(good)
        self._pending = INFORMATIVE if new else UNINFORMATIVE
        self._as.append(len(new))
        shown = [] if self.feedback_ablation else [self.facts[i] for i in new]
        if new:
            self._cf_text = prompts.patient_answer([]) + "\n" + prompts.update_instruction()
        return StepResult(
            feedback=prompts.patient_answer(shown) + "\n" + prompts.update_instruction(),
            critique=1 if good else -1,
            channel=Channel.AS,
            valid=True,
            info={
                "turn": self._turn,
                "question": question,
                "new_fact_ids": [i + 1 for i in new],
                "informative": bool(new),
                "repeat": repeat,
                "user_source": source,
                "user_error": error,
                "as_proxy": len(new),
            },
        )

    def _score_update(
        self, text: str, tag: str, counterfactual: Any, role: str
    ) -> tuple[parsing.ParseResult, int, float, str]:
        """Parse and judge a belief: (guess, critique, BT proxy, rule used).

        ``role``: "update" (an update round), "answer_as_update" (a final answer in place of
        an update round: no counterfactual reaches it) or "final" (valid answers get 0).
        """
        guess = _belief_from(text, tag)
        if not guess.ok:
            self._n_invalid += 1
            return guess, -1, 0.0, "invalid"
        w = np.asarray(guess.value, dtype=float)
        prev = self._belief
        delta = scoring.margin(w, self.gold) - scoring.margin(prev, self.gold)
        if role == "final":
            critique, rule = 0, "final"
        elif self._pending == UNINFORMATIVE:
            critique, rule = (1 if scoring.same(delta, 0.0) else -1), "invariance"
        elif role == "answer_as_update":
            critique, rule = 0, "no_counterfactual"
        else:
            kind = parsing.payload_kind(counterfactual) if counterfactual is not None else None
            cf = _belief_from(counterfactual, kind) if kind else parsing.ParseResult.failure("missing")
            if not cf.ok:
                self._cf_missing += 1
                critique, rule = 0, "counterfactual_missing"
            else:
                self._cf_checks += 1
                d_cf = float(np.linalg.norm(np.asarray(cf.value) - prev))
                d_t = float(np.linalg.norm(w - prev))
                critique, rule = (1 if d_cf <= d_t + scoring.EQUAL_TOL else -1), "counterfactual"
        self._belief = w
        if self._first_guess is None:
            self._first_guess = w
        return guess, critique, float(delta), rule

    def update(self, text: str, counterfactual: str | None = None) -> StepResult:
        self._expect("update")
        guess, critique, delta, rule = self._score_update(text, "interact", counterfactual, "update")
        self._bt.append(delta)
        self._pending = UNINFORMATIVE
        self._cf_text = None
        self._phase = "act" if self._turn < self.max_turns else "answer"
        follow = (
            prompts.query_instruction(self._turn, self.max_turns)
            if self._phase == "act"
            else prompts.answer_instruction()
        )
        head = (
            "Scores recorded."
            if guess.ok
            else f"Your scores were invalid because {guess.error}. Your previous valid scores are kept."
        )
        return StepResult(
            feedback=head + "\n" + follow,
            critique=critique,
            channel=Channel.BT,
            valid=guess.ok,
            info={"turn": self._turn, "error": guess.error, "bt_proxy": delta, "bt_rule": rule},
        )

    def answer(self, text: str) -> StepResult:
        self._expect("act", "update", "answer")
        replaces_update = self._phase == "update"
        role = "answer_as_update" if replaces_update else "final"
        guess, critique, delta, rule = self._score_update(text, "answer", None, role)
        if replaces_update:
            self._bt.append(delta)
        self._phase = "done"
        self._cf_text = None
        if guess.ok:
            self._final = np.asarray(guess.value, dtype=float)
            feedback = "Final answer recorded."
        else:
            feedback = f"Your final answer was invalid because {guess.error}. The consultation is over."
        return StepResult(
            feedback=feedback,
            critique=critique,
            channel=Channel.BT,
            valid=guess.ok,
            done=True,
            info={"turn": self._turn, "error": guess.error, "reward": self.reward(), "bt_rule": rule},
        )

    def reward(self) -> float:
        if self._final is None:
            return 0.0
        return float(scoring.unique_argmax(self._final) == self.gold)

    def proxies(self) -> dict[str, Any]:
        open_total = len(self.facts) - len(self.known)
        revealed = len(self._revealed) - len(self.known)
        bt = np.asarray(self._bt, dtype=float)
        first_correct = self._first_guess is not None and scoring.unique_argmax(self._first_guess) == self.gold
        consistent = (
            self._final is not None
            and self._first_guess is not None
            and scoring.unique_argmax(self._final) == scoring.unique_argmax(self._first_guess)
        )
        return {
            "as": list(self._as),
            "bt": list(self._bt),
            "reward": self.reward(),
            "answered": float(self._final is not None),
            "n_informative": float(self._n_informative),
            "n_invalid": float(self._n_invalid),
            "n_repeats": float(self._n_repeats),
            "facts_revealed": float(revealed),
            "fact_coverage": float(revealed / open_total) if open_total else 0.0,
            "margin_belief": scoring.margin(self._belief, self.gold),
            "belief_correct": float(scoring.unique_argmax(self._belief) == self.gold),
            "first_guess_correct": float(first_correct),
            "final_equals_first_guess": float(consistent),
            "c_bt": float(np.clip(bt, 0.0, None).sum()),
            "cf_checks": float(self._cf_checks),
            "cf_missing": float(self._cf_missing),
            **self.user.stats.as_dict("user_"),
        }
