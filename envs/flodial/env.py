"""FloDial as an :class:`~envs.base.ActiveReasoningEnv`: find the fault among D candidates.

Episode (:mod:`envs.flodial.data`): the problem description and D = 5 candidate faults.
Each action round is a free-text yes/no question (:func:`envs.parsing.parse_question`); the
simulated user (:mod:`envs.users`) maps it to one row of the reference table (the gold
fault's path questions) and the environment answers that row's fixed Yes/No, or Unknown
when nothing matches; a row that was already answered gives Unknown (a repeat). Each update
round is D scores in [0, 1]; the starting belief is 1/D each. 10 turns. Reward 1 iff the
final vector's unique argmax is the gold candidate.

Critiques (paper E.3.1, SPEC section 3):

- action (AS): Yes +1, No 0, Unknown (no match, repeated row) or invalid -1;
- update (BT): -1 for an invalid update (the previous belief is kept). After Yes/No: +1
  iff the gold candidate's score rose (w_t[gold] > w_prev[gold]), else -1; one exception,
  ``bt_saturation`` (default on): when the gold score was already 1 and stays 1 the update
  gets +1, since no rise is possible (off = the paper's rule to the letter). After Unknown
  or an invalid question: +1 iff the belief is unchanged (every score within 1e-9), else -1;
- final answer (BT): -1 if invalid; in place of an update round it is scored as that
  update; otherwise 0.

Proxies: ``as`` = 1 for a Yes/No answer, else 0 (paper E.3.1: the query is uninformative
when the answer is Unknown); ``bt`` = w_t[gold] - w_prev[gold] per update round (0 when
invalid); scalars mirror PE plus answer counts, table coverage and the user's counters.

Options: the user options of :mod:`envs.users`; ``feedback_ablation`` shows "Unknown" for
every answer while critiques and proxies use the true answers; ``bt_saturation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envs import parsing, scoring
from envs.base import ActiveReasoningEnv, Channel, StepResult
from envs.flodial import prompts
from envs.users import RowRequest, SimulatedUser, make_user, split_user_options

ANSWER_WORDS = ("Yes", "No")
AS_CRITIQUE = {"Yes": 1, "No": 0, "Unknown": -1}


class FloDialEnv(ActiveReasoningEnv):
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
        self.gold = int(gold_idx)
        self.table_questions = tuple(str(q) for q in table_questions)
        self.table_answers = tuple(str(a).strip().capitalize() for a in table_answers)
        if len(self.table_questions) != len(self.table_answers) or set(self.table_answers) - set(ANSWER_WORDS):
            raise ValueError("the reference table needs one Yes/No answer per question")
        self.max_turns = int(max_turns)
        self.seed = int(seed)
        self.user = user if user is not None else make_user()
        self.feedback_ablation = bool(feedback_ablation)
        self.bt_saturation = bool(bt_saturation)

        self._phase = "act"
        self._turn = 0
        self._asked_rows: set[int] = set()
        self._pending = "Unknown"
        self._belief = np.full(self.n, 1.0 / self.n)
        self._first_guess: np.ndarray | None = None
        self._final: np.ndarray | None = None
        self._as: list[int] = []
        self._bt: list[float] = []
        self._counts = {"Yes": 0, "No": 0, "Unknown": 0}
        self._n_invalid = 0
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
    def phase(self) -> str:
        """Which call the episode expects next: "act", "update", "answer" or "done"."""
        return self._phase

    @property
    def system_prompt(self) -> str:
        return prompts.system_prompt(self.n, self.max_turns)

    def initial_messages(self) -> list[dict[str, str]]:
        task = prompts.task_text(self.problem, self.candidates)
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": task + "\n\n" + prompts.query_instruction(0, self.max_turns)},
        ]

    def final_turn_notice(self) -> str:
        return prompts.final_turn_notice()

    def _expect(self, *phases: str) -> None:
        if self._phase not in phases:
            raise RuntimeError(f"episode expects {self._phase!r} next, not {phases[0]!r}")

    async def act(self, text: str) -> StepResult:
        self._expect("act")
        self._turn += 1
        self._phase = "update"
        payload = parsing.extract_payload(text, "interact")
        query = payload if not payload.ok else parsing.parse_question(payload.value)
        if not query.ok:
            self._n_invalid += 1
            self._pending = "Unknown"
            self._as.append(0)
            feedback = f"Your question was invalid because {query.error}. The user did not answer."
            return StepResult(
                feedback=feedback + "\n" + prompts.update_instruction(self.n),
                critique=-1,
                channel=Channel.AS,
                valid=False,
                info={"turn": self._turn, "error": query.error, "as_proxy": 0},
            )
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
        self._pending = word
        self._as.append(int(word != "Unknown"))
        shown = "Unknown" if self.feedback_ablation else word
        return StepResult(
            feedback=prompts.user_answer(shown) + "\n" + prompts.update_instruction(self.n),
            critique=AS_CRITIQUE[word],
            channel=Channel.AS,
            valid=True,
            info={
                "turn": self._turn,
                "question": question,
                "row": None if row is None else row + 1,
                "user_answer": word,
                "repeat": repeat,
                "user_source": reply.source,
                "user_error": reply.error,
                "as_proxy": int(word != "Unknown"),
            },
        )

    def _score_update(self, text: str, tag: str, judge: bool) -> tuple[parsing.ParseResult, int, float, str]:
        """Parse a belief and, with ``judge``, score it as the update of the current turn."""
        payload = parsing.extract_payload(text, tag)
        guess = payload if not payload.ok else parsing.parse_vector(payload.value, self.n)
        if not guess.ok:
            self._n_invalid += 1
            return guess, -1, 0.0, "invalid"
        w = np.asarray(guess.value, dtype=float)
        prev = self._belief
        delta = float(w[self.gold] - prev[self.gold])
        if not judge:
            critique, rule = 0, "final"
        elif self._pending == "Unknown":
            critique, rule = (1 if scoring.same(w, prev) else -1), "invariance"
        else:
            rose = delta > scoring.EQUAL_TOL
            saturated = self.bt_saturation and min(w[self.gold], prev[self.gold]) >= 1.0 - scoring.EQUAL_TOL
            critique, rule = (1 if rose or saturated else -1), "gold_rise"
            self._informative_updates += 1
            self._informative_rises += int(rose)
        self._belief = w
        if self._first_guess is None:
            self._first_guess = w
        return guess, critique, delta, rule

    def update(self, text: str, counterfactual: str | None = None) -> StepResult:
        self._expect("update")
        guess, critique, delta, rule = self._score_update(text, "interact", judge=True)
        self._bt.append(delta)
        self._pending = "Unknown"
        self._phase = "act" if self._turn < self.max_turns else "answer"
        follow = (
            prompts.query_instruction(self._turn, self.max_turns)
            if self._phase == "act"
            else prompts.answer_instruction(self.n)
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
        guess, critique, delta, rule = self._score_update(text, "answer", judge=replaces_update)
        if replaces_update:
            self._bt.append(delta)
        self._phase = "done"
        if guess.ok:
            self._final = np.asarray(guess.value, dtype=float)
            feedback = "Final answer recorded."
        else:
            feedback = f"Your final answer was invalid because {guess.error}. The session is over."
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
        bt = np.asarray(self._bt, dtype=float)
        first_correct = self._first_guess is not None and scoring.unique_argmax(self._first_guess) == self.gold
        consistent = (
            self._final is not None
            and self._first_guess is not None
            and scoring.unique_argmax(self._final) == scoring.unique_argmax(self._first_guess)
        )
        rows = len(self.table_questions)
        return {
            "as": list(self._as),
            "bt": list(self._bt),
            "reward": self.reward(),
            "answered": float(self._final is not None),
            "n_informative": float(self._counts["Yes"] + self._counts["No"]),
            "n_yes": float(self._counts["Yes"]),
            "n_no": float(self._counts["No"]),
            "n_unknown": float(self._counts["Unknown"]),
            "n_invalid": float(self._n_invalid),
            "n_repeats": float(self._n_repeats),
            "table_coverage": float(len(self._asked_rows) / rows) if rows else 0.0,
            "gold_score": float(self._belief[self.gold]),
            "belief_correct": float(scoring.unique_argmax(self._belief) == self.gold),
            "first_guess_correct": float(first_correct),
            "final_equals_first_guess": float(consistent),
            "c_bt": float(np.clip(bt, 0.0, None).sum()),
            "gold_rise_rate": (
                float(self._informative_rises / self._informative_updates) if self._informative_updates else 0.0
            ),
            **self.user.stats.as_dict("user_"),
        }
