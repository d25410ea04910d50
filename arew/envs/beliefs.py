"""Turn order and belief bookkeeping shared by the task environments: the task SDK's episode classes.

Every task plays the same episode (see :mod:`arew.envs.base`): a question in <interact>, a belief
vector in <interact>, judged against the previous *valid* belief, and a final vector in
<answer>. :class:`BeliefEnv` owns that machinery; a task supplies its opening (:meth:`BeliefEnv.opening`),
its questions and their critique (``act``, built on :meth:`BeliefEnv.open_turn` and
:meth:`BeliefEnv.action_step`), its BT rule (:meth:`BeliefEnv.bt_proxy`, :meth:`BeliefEnv.judge_belief`), its
wording (:class:`BeliefPrompts`), reward and proxies. :class:`ChoiceEnv` adds what the tasks that
pick one of several options share; :class:`CandidateSetEnv` is the choice whose belief is the set of options
still possible, with its BT rule built in. A task's ``act`` in full (``envs/number_search`` is the whole task)::

    async def act(self, text):
        query = self.open_turn(text, lambda payload: parse_threshold(payload, self.n_candidates))
        if not query.ok:
            return self.invalid_question(query.error)  # critique -1, the round is spent
        news = ...  # whether the answer can change the belief
        return self.action_step(reply, critique=1 if news else -1, as_proxy=int(news), news=news, k=query.value)
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np

from arew.envs import parsing, scoring
from arew.envs.base import ActiveReasoningEnv, Channel, StepResult


class BeliefPrompts(Protocol):
    """What an :class:`BeliefEnv` asks of its task's prompts (a module of these functions, typically)."""

    def query_instruction(self, turn: int, max_turns: int) -> str:
        """The instruction before action round ``turn + 1`` (``turn`` rounds done of ``max_turns``)."""

    def update_instruction(self) -> str:
        """The instruction after an answer: state the updated belief."""

    def answer_instruction(self) -> str:
        """The instruction after the last update: give the final answer."""

    def final_turn_notice(self) -> str:
        """What the agent reads when the token budget leaves room for the answer only."""


class BeliefEnv(ActiveReasoningEnv):
    """One episode's phase, turn count, belief and per-turn proxies; see the module docstring."""

    prompts: BeliefPrompts
    """The task's wording (:class:`BeliefPrompts`); a module with those four functions will do."""

    # Feedback wording; "{}" is the parse error.
    RECORDED: str
    INVALID_BELIEF: str
    FINAL_RECORDED: str
    INVALID_FINAL: str
    INVALID_QUESTION: str

    def __init__(self, max_turns: int, prior: np.ndarray):
        self.max_turns = int(max_turns)
        self._phase = "act"
        self._turn = 0
        self._informative = False  # whether the latest question's answer carried news
        self._belief = prior
        self._first_guess: np.ndarray | None = None
        self._final: np.ndarray | None = None
        self._final_step = 0.0  # BT proxy of a final answer that follows an update round
        self._as: list[int] = []
        self._bt: list[float] = []
        self._n_invalid = 0

    @property
    def phase(self) -> str:
        """Which call the episode expects next: "act", "update", "answer" or "done"."""
        return self._phase

    @property
    def turn(self) -> int:
        """Action rounds opened so far (the current one included)."""
        return self._turn

    @property
    def belief(self) -> np.ndarray:
        """The latest valid belief (the prior before the first one)."""
        return self._belief

    @property
    def informative(self) -> bool:
        """Whether the latest question's answer carried news: the update that follows must respond to it."""
        return self._informative

    @property
    def first_guess(self) -> np.ndarray | None:
        """The first valid belief of the episode (None before it)."""
        return self._first_guess

    @property
    def final_belief(self) -> np.ndarray | None:
        """The valid final answer (None before it, or when it was invalid)."""
        return self._final

    @property
    def as_proxies(self) -> list[int]:
        """Each action round's AS proxy so far (a copy)."""
        return list(self._as)

    @abc.abstractmethod
    def opening(self) -> str:
        """The task as the first user message shows it, before the first instruction."""

    def initial_messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.opening() + "\n\n" + self.prompts.query_instruction(0, self.max_turns)},
        ]

    def final_turn_notice(self) -> str:
        return self.prompts.final_turn_notice()

    def _update_instruction(self) -> str:
        return self.prompts.update_instruction()

    def _answer_instruction(self) -> str:
        return self.prompts.answer_instruction()

    def _expect(self, *phases: str) -> None:
        if self._phase not in phases:
            raise RuntimeError(f"episode expects {self._phase!r} next, not {phases[0]!r}")

    def open_turn(self, text: str, parse: Callable[[str], parsing.ParseResult]) -> parsing.ParseResult:
        """Start an action round and parse its question from <interact> with ``parse`` (the task's question
        parser, given the payload); an error result is answered with :meth:`invalid_question`."""
        self._expect("act")
        self._turn += 1
        self._phase = "update"
        payload = parsing.extract_payload(text, "interact")
        return payload if not payload.ok else parse(payload.value)

    def action_step(
        self, reply: str, *, critique: int, as_proxy: int, news: bool, valid: bool = True, **info: Any
    ) -> StepResult:
        """The step that answers a question: ``reply`` (the user's answer), the question's ``critique``
        (+1/0/-1), its ``as_proxy`` (how informative it was, the task's own measure), ``news`` (whether the
        next update must respond to it, :attr:`informative`); ``info`` goes into the step's info."""
        self._as.append(as_proxy)
        self._informative = news
        return StepResult(
            feedback=reply + "\n" + self._update_instruction(),
            critique=critique,
            channel=Channel.AS,
            valid=valid,
            info={"turn": self._turn, **info, "as_proxy": as_proxy},
        )

    def invalid_question(self, error: str) -> StepResult:
        """The step of a question that did not parse: critique -1, no news, the round spent; ``error`` says why."""
        self._n_invalid += 1
        return self.action_step(self.INVALID_QUESTION.format(error), critique=-1, as_proxy=0, news=False, valid=False, error=error)

    def parse_belief(self, text: Any, tag: str) -> parsing.ParseResult:
        """The belief vector in ``<tag>`` of ``text``, the size of the prior (an error says why it is not)."""
        payload = parsing.extract_payload(text, tag)
        return payload if not payload.ok else parsing.parse_vector(payload.value, self._belief.size)

    @abc.abstractmethod
    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        """How much closer ``w`` is to the truth than the previous valid belief ``prev``."""

    @abc.abstractmethod
    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        """(BT critique, rule) of a valid belief ``w``: ``delta`` is its :meth:`bt_proxy` against the previous
        valid belief; ``role`` is "update" or "answer" (a final answer in place of an update round, which
        gets no counterfactual); ``counterfactual`` the belief stated again without the answer, when the task
        asks for one."""

    def _record_belief(
        self, text: str, tag: str, role: str, counterfactual: str | None = None
    ) -> tuple[parsing.ParseResult, int, float, str]:
        """Parse and judge a belief, keeping it when valid: (guess, critique, BT proxy, rule).
        ``role`` "final" is an answer that takes no update round's place: a valid one gets 0."""
        guess = self.parse_belief(text, tag)
        if not guess.ok:
            self._n_invalid += 1
            return guess, -1, 0.0, "invalid"
        w = np.asarray(guess.value, dtype=float)
        delta = self.bt_proxy(w, self._belief)
        critique, rule = (0, "final") if role == "final" else self.judge_belief(w, delta=delta, role=role, counterfactual=counterfactual)
        self._belief = w
        if self._first_guess is None:
            self._first_guess = w
        return guess, critique, delta, rule

    def _bt_info(self, guess: parsing.ParseResult, rule: str, **info: Any) -> dict[str, Any]:
        info = {"turn": self._turn, "error": guess.error, **info}
        return {**info, "bt_rule": rule}

    def update(self, text: str, counterfactual: str | None = None) -> StepResult:
        self._expect("update")
        guess, critique, delta, rule = self._record_belief(text, "interact", "update", counterfactual)
        self._bt.append(delta)
        self._informative = False
        self._phase = "act" if self._turn < self.max_turns else "answer"
        follow = (
            self.prompts.query_instruction(self._turn, self.max_turns)
            if self._phase == "act"
            else self._answer_instruction()
        )
        head = self.RECORDED if guess.ok else self.INVALID_BELIEF.format(guess.error)
        return StepResult(
            feedback=head + "\n" + follow,
            critique=critique,
            channel=Channel.BT,
            valid=guess.ok,
            info=self._bt_info(guess, rule, bt_proxy=delta),
        )

    def answer(self, text: str) -> StepResult:
        self._expect("act", "update", "answer")
        replaces_update = self._phase == "update"
        guess, critique, delta, rule = self._record_belief(text, "answer", "answer" if replaces_update else "final")
        if replaces_update:
            self._bt.append(delta)
        else:
            self._final_step = delta
        self._phase = "done"
        if guess.ok:
            self._final = np.asarray(guess.value, dtype=float)
        return StepResult(
            feedback=self.FINAL_RECORDED if guess.ok else self.INVALID_FINAL.format(guess.error),
            critique=critique,
            channel=Channel.BT,
            valid=guess.ok,
            done=True,
            info=self._bt_info(guess, rule, reward=self.reward()),
        )

    def episode_proxies(self) -> dict[str, Any]:
        """The proxies every task reports, besides its own (a task's ``proxies()`` adds its own to these).

        ``bt`` holds one BT proxy per update round (a final answer given in place of an update
        round is that round's entry); ``bt_final`` is the belief step of a final answer that
        follows an update round (0 otherwise, and 0 for an invalid answer).

        ``c_bt`` is Def. 3.2's sum of absorbed belief progress, sum_{t=0}^{H-1} max(dPsi_t, 0),
        over the whole chain of valid beliefs from the prior b_0 to the final answer b_H, so
        the final answer's step counts; the task's BT proxy stands in for
        dPsi = Psi(b_{t+1}) - Psi(b_t) (PE: cos(w, w*); MediQ: the gold margin; FloDial:
        w[gold]), each a confidence in the true state like the paper's Psi(b) = b(s*).
        """
        steps = np.asarray([*self._bt, self._final_step], dtype=float)
        return {
            "as": list(self._as),
            "bt": list(self._bt),
            "bt_final": float(self._final_step),
            "reward": self.reward(),
            "answered": float(self._final is not None),
            "n_invalid": float(self._n_invalid),
            "c_bt": float(np.clip(steps, 0.0, None).sum()),
        }


def top_options(w: np.ndarray) -> frozenset[int]:
    """The options whose score is within :data:`arew.envs.scoring.EQUAL_TOL` of the top score."""
    w = np.asarray(w, dtype=float)
    return frozenset(np.flatnonzero(w >= w.max() - scoring.EQUAL_TOL).tolist())


class ChoiceEnv(BeliefEnv):
    """A task whose belief scores options in [0, 1] and whose answer is the unique top score."""

    RECORDED = "Scores recorded."
    INVALID_BELIEF = "Your scores were invalid because {}. Your previous valid scores are kept."
    FINAL_RECORDED = "Final answer recorded."

    def __init__(self, max_turns: int, n_options: int, gold: int):
        super().__init__(max_turns, np.full(n_options, 1.0 / n_options))
        self.gold = int(gold)

    def reward(self) -> float:
        if self._final is None:
            return 0.0
        return float(scoring.unique_argmax(self._final) == self.gold)

    def choice_proxies(self) -> dict[str, float]:
        """``final_equals_first_guess`` is Observation 3's belief consistency: the final answer
        states the same judgment as the first valid belief, i.e. the same set of top options
        (scores within :data:`arew.envs.scoring.EQUAL_TOL` of the maximum). A tie is the judgment
        "one of these", so it equals only the identical tie: two different ties are not
        consistent, nor are a tie and a single option (resolving or opening a tie revises the
        judgment), while a tie kept unchanged to the end is. 0 without a valid final answer.
        """
        first_correct = self._first_guess is not None and scoring.unique_argmax(self._first_guess) == self.gold
        consistent = (
            self._final is not None
            and self._first_guess is not None
            and top_options(self._final) == top_options(self._first_guess)
        )
        return {
            "belief_correct": float(scoring.unique_argmax(self._belief) == self.gold),
            "first_guess_correct": float(first_correct),
            "final_equals_first_guess": float(consistent),
        }


class CandidateSetEnv(ChoiceEnv):
    """A task whose belief is the set of candidates still possible, and whose answer is one candidate.

    Twenty questions, number guessing, fault finding: each answer rules some candidates out, and the
    agent keeps the set of those still possible. It states the set in <interact> as candidate numbers,
    ``2, 5, 7`` (1-based, as shown; :func:`arew.envs.parsing.parse_index_set`), and answers with one
    number in <answer>; a list of several is an invalid answer (a hedge is not an answer). The reward is
    1 iff the answer is the gold. The API speaks of sets of 0-based indices: :attr:`candidate_set`,
    :attr:`ruled_out`, :attr:`consistent`, :attr:`final_answer`, ``gold``.

    The task answers each valid question with :meth:`elimination_step`, naming the candidates the
    answer rules out; the BT critique and proxy follow from those alone. Underneath, the belief vector
    of :class:`BeliefEnv` is the uniform distribution over the set (1/|S| on each member, 0 elsewhere),
    so the prior (1/n everywhere) is the set of all candidates and what :class:`ChoiceEnv` computes
    reads right: the reward (a one-candidate answer is the unique top), ``belief_correct`` (the set is
    {gold}), belief consistency (the same set).

    BT critique of a valid set S, with R the candidates the answers so far rule out, C the others (the
    gold always among them), N those the latest answer newly ruled out and P the previous valid set;
    the first rule that applies:

    - -1 ``left_out_gold``: the gold is not in S;
    - -1 ``left_out_consistent``: S leaves out a candidate of C. No answer rules it out, so leaving it
      out is a guess, not an update; a guess that keeps the gold must not pay (else dropping
      candidates at random, or keeping one guessed candidate, would earn what tracking earns
      whenever it is lucky), and it gets the -1 that an unlucky one gets, so the critique of a guess
      does not depend on its luck. Every update restates the whole set, so the guess costs -1 at
      every update until the candidate is put back;
    - -1 ``readded_ruled_out``: S puts back a candidate of R that P had dropped;
    - -1 ``ignored_answer``: the latest answer ruled out candidates of P and S keeps them all;
    - +1 ``follows_answers``: S is exactly C, reached by dropping candidates of R;
    - 0 ``partial``: S drops candidates of R but keeps others. Keeping a candidate that is no longer
      possible is caution, not a mistake, but it does not earn +1: a policy dropping one impossible
      candidate per update would otherwise be paid for trickling out one answer's news, and paid
      after answers that brought none, where tracking has nothing left to do;
    - 0 ``restored``: S only puts back candidates of C that an earlier guess left out;
    - 0 ``unchanged``: S is P and the latest answer ruled out none of P.

    So stating C after every answer earns the most any update can from every state (+1 when it drops
    something, else 0), and restating the prior earns -1 after news. The critique never depends on the
    gold: the gold is always in C, so the first rule is the second's special case, named apart for the
    diagnostics. A final answer in place of an update round is judged as the set {answer}; one after
    the last update round gets 0 (the reward judges it).

    BT proxy: w[gold] - prev[gold] with w uniform over the set, i.e. the change of Psi(S) = 1/|S| while
    the gold is in S and 0 once it is not: the paper's Psi(b) = b(s*) for the belief uniform over the
    candidates still held. ``c_bt`` (:meth:`BeliefEnv.episode_proxies`) is then the probability mass
    the agent gathered on the truth: 1 - 1/n for an episode that narrows to the gold and names it
    without ever dropping it. Def. 3.2 sums progress only, so a set that narrows by a guess and widens
    back counts the narrowing and not the widening; the critique charges the guess.
    """

    RECORDED = "Candidates recorded."
    INVALID_BELIEF = "Your list of candidates was invalid because {}. Your previous valid list is kept."

    def __init__(self, max_turns: int, n_candidates: int, gold: int):
        if n_candidates < 2 or not 0 <= int(gold) < n_candidates:
            raise ValueError("a candidate set needs at least two candidates and the gold among them")
        super().__init__(max_turns, n_candidates, gold)
        self.n_candidates = int(n_candidates)
        self._ruled_out_mask = np.zeros(self.n_candidates, dtype=bool)  # by the answers so far
        self._news_mask = np.zeros(self.n_candidates, dtype=bool)  # newly ruled out by this turn's answer

    @property
    def candidate_set(self) -> frozenset[int]:
        """The latest valid set (every candidate before the first one; the answer after a valid one)."""
        return frozenset(np.flatnonzero(self.belief > 0).tolist())

    @property
    def ruled_out(self) -> frozenset[int]:
        """The candidates the answers so far rule out."""
        return frozenset(np.flatnonzero(self._ruled_out_mask).tolist())

    @property
    def consistent(self) -> frozenset[int]:
        """The candidates consistent with every answer so far: the set a tracking agent holds."""
        return frozenset(np.flatnonzero(~self._ruled_out_mask).tolist())

    @property
    def final_answer(self) -> int | None:
        """The candidate the valid final answer names (None before it, or when it was invalid)."""
        return None if self.final_belief is None else int(np.argmax(self.final_belief))

    def open_turn(self, text: str, parse: Callable[[str], parsing.ParseResult]) -> parsing.ParseResult:
        """As :meth:`BeliefEnv.open_turn`; the turn's answer rules nothing out until :meth:`elimination_step` says what."""
        self._news_mask = np.zeros(self.n_candidates, dtype=bool)  # until an answer says otherwise: no news
        return super().open_turn(text, parse)

    def elimination_step(
        self, reply: str, ruled_out: Iterable[int], *, critique: int | None = None, **info: Any
    ) -> StepResult:
        """The step that answers a valid question: ``reply`` (the user's answer) and ``ruled_out``, the
        candidates (0-based) inconsistent with it; those no earlier answer ruled out are its news.

        The AS critique is ``critique`` when given, else +1 iff there is news and -1 otherwise (for a
        truthful yes/no answer that is number search's rule: the question split the candidates still
        possible). The AS proxy is how many candidates the answer newly ruled out. ``info`` goes into
        the step's info.

        Raises:
            ValueError: ``ruled_out`` names the gold or a number that is no candidate: the task's
                answers contradict its gold, and every critique would be wrong.
        """
        indices = np.fromiter(ruled_out, dtype=int)
        if ((indices < 0) | (indices >= self.n_candidates)).any():
            raise ValueError(f"ruled-out candidates must be 0-based indices below {self.n_candidates}: {indices.tolist()}")
        if (indices == self.gold).any():
            raise ValueError(f"an answer about the gold cannot rule out the gold ({self.gold})")
        news = np.zeros(self.n_candidates, dtype=bool)
        news[indices] = True
        news &= ~self._ruled_out_mask
        self._news_mask = news
        self._ruled_out_mask = self._ruled_out_mask | news
        n_news = int(news.sum())
        as_critique = (1 if n_news else -1) if critique is None else critique
        return self.action_step(reply, critique=as_critique, as_proxy=n_news, news=bool(n_news), **info)

    def parse_belief(self, text: Any, tag: str) -> parsing.ParseResult:
        """The candidate set in ``<tag>`` as its belief vector (uniform over the set); an answer names one candidate."""
        payload = parsing.extract_payload(text, tag)
        chosen = payload if not payload.ok else parsing.parse_index_set(payload.value, self.n_candidates)
        if not chosen.ok:
            return chosen
        if tag == "answer" and len(chosen.value) != 1:
            return parsing.ParseResult.failure(f"the final answer must name exactly one candidate, not {len(chosen.value)}")
        w = np.zeros(self.n_candidates)
        w[list(chosen.value)] = 1.0 / len(chosen.value)
        return parsing.ParseResult.success(w)

    def bt_proxy(self, w: np.ndarray, prev: np.ndarray) -> float:
        """The change of Psi(S) = 1/|S| if the gold is in S, else 0 (see the class docstring)."""
        return float(w[self.gold] - prev[self.gold])

    def judge_belief(self, w: np.ndarray, *, delta: float, role: str, counterfactual: str | None) -> tuple[int, str]:
        """The rules of the class docstring, on indicator masks; ``delta``, ``role`` and ``counterfactual``
        play no part (the answers so far decide, and an answer in place of an update is judged as one)."""
        kept, before = w > 0, self.belief > 0
        dropped, added = before & ~kept, kept & ~before
        if not kept[self.gold]:
            return -1, "left_out_gold"
        if (~kept & ~self._ruled_out_mask).any():
            return -1, "left_out_consistent"
        if (added & self._ruled_out_mask).any():
            return -1, "readded_ruled_out"
        answered = self._news_mask & before
        if answered.any() and not (answered & dropped).any():
            return -1, "ignored_answer"
        if dropped.any():  # every dropped candidate is ruled out: the consistent ones are all kept
            return (0, "partial") if (kept & self._ruled_out_mask).any() else (1, "follows_answers")
        return 0, ("restored" if added.any() else "unchanged")

    def candidate_proxies(self) -> dict[str, float]:
        """:meth:`ChoiceEnv.choice_proxies` on sets (``belief_correct``: the latest set is {gold};
        ``final_equals_first_guess``: the answer is the first set), plus ``n_consistent``, how many
        candidates the answers left possible (1: the questions identified the gold), and
        ``answer_consistent``, whether the final answer is one of them. A wrong answer the answers
        still allowed is a failure to ask; one they ruled out is a failure to track.
        """
        answer = self.final_answer
        return {
            **self.choice_proxies(),
            "n_consistent": float(len(self.consistent)),
            "answer_consistent": float(answer is not None and not self._ruled_out_mask[answer]),
        }
