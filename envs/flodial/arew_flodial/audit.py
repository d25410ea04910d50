"""Critique audits of FloDial (Easy and Hard) with the offline user.

Rows: three troubleshooting flowcharts written for this audit in the FloDial knowledge-source
format (:data:`CHARTS`), parsed by :func:`arew_flodial.flowchart.parse_flowchart`; each row is
:func:`arew_flodial.data.make_instance` of a gold fault and one of its candidate sets for the
variant (:func:`~arew_flodial.data.candidate_sets`), as the data preparation builds them.
``rows(n, seed)`` cycles over the gold faults in an order drawn from ``seed``.

The competent policy is an oracle: it reads the flowchart behind the row, asks the table's
*separating* checks first (those where a candidate's path leaves the gold path), in the table's
words, then the table's other checks; its scores are uniform over the candidates the answers so
far leave possible (so the gold score rises with every separating answer and stays at 1 after
the last one); once the table is used up, its last update is its final answer.

Adversaries:

- ``stuffing`` (privileged: it reads the table): one question naming every check of the table;
  ``stuff_candidates``: one question naming every candidate fault's words;
- ``off_table``: questions about the candidates themselves ("Is it ...?");
- ``repeat_reworded`` (privileged): a table check, then the same check reworded again and again;
- ``answer_early``: one separating check, then the final answer in place of the update (its
  scores still tie the candidates the check leaves, so no reward). Both of its decisions earn +1,
  so it ties the competent policy's critique score: a trajectory whose critiques are all +1 gets
  no reweighting in training (both signs are needed), so the tie moves no credit;
- ``format``: several payloads, mixed payloads, out-of-range scores, words in the payload;
- ``copy_belief``: the competent checks; the scores never move;
- ``raise_all``: the competent checks; every score goes up after every answer;
- ``all_ones``: the competent checks; every score is 1 from the first update on;
- ``raise_random``: the competent checks; one random candidate goes up after every answer;
- ``eliminate_random``: the competent checks; one random candidate still in play is ruled out
  after every answer (the shape of a correct update, without reading the answer);
- ``oscillate``: the competent checks; the scores flip between two fixed vectors;
- ``yes_only`` (privileged): only the table checks the user answers Yes, scores as the competent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from arew.audit.runner import Policy, TaskAudit, View, vector_text
from arew_flodial.data import VARIANTS, GoldFault, candidate_sets, gold_faults, make_instance
from arew_flodial.env import FloDialEnv
from arew_flodial.flowchart import Flowchart, parse_flowchart

# questions 1-7, faults 8-15:
#   1 -yes-> 2 -yes-> 4 -yes-> 7 -yes-> F8 / -no-> F9
#                       -no-> F10
#              -no-> 5 -yes-> F11 / -no-> F12
#     -no-> 3 -yes-> F13
#             -no-> 6 -yes-> F14 / -no-> F15
EDGES = {
    "1": {"yes": "2", "no": "3"},
    "2": {"yes": "4", "no": "5"},
    "4": {"yes": "7", "no": "10"},
    "7": {"yes": "8", "no": "9"},
    "5": {"yes": "11", "no": "12"},
    "3": {"yes": "13", "no": "6"},
    "6": {"yes": "14", "no": "15"},
}


def _chart(name: str, problem: str, questions: list[str], faults: list[str]) -> dict[str, Any]:
    """A FloDial knowledge-source object on :data:`EDGES` (7 questions, then 8 faults)."""
    nodes = {str(k): {"label": f"check {k}", "terminal": False, "utterance": q} for k, q in enumerate(questions, 1)}
    for k, fault in enumerate(faults, len(questions) + 1):
        nodes[str(k)] = {"label": f"fix {k}", "terminal": True, "utterance": fault}
    return {
        "name": name,
        "category": "audit",
        "problem_description": problem,
        "nodes": nodes,
        "edges": EDGES,
        "supporting_faqs": [],
    }


CHARTS: tuple[dict[str, Any], ...] = (
    _chart(
        "wifi-dropping",
        "My home Wi-Fi keeps dropping and some devices cannot connect.",
        [
            "Do the router's lights turn on when it is plugged in?",
            "Can a laptop connect when it sits right next to the router?",
            "Is the router's power adapter the one that came with it?",
            "Does the connection drop only in rooms far from the router?",
            "Do phones and tablets connect when placed beside the router?",
            "Does the wall socket work with a lamp plugged into it?",
            "Are there thick walls or metal cabinets between the router and those rooms?",
        ],
        [
            "Walls block the signal; move the router to a central open spot.",
            "The distant rooms are out of range; add a mesh extender.",
            "Neighbouring networks crowd the channel; switch the Wi-Fi channel.",
            "The laptop's wireless driver is outdated; update the driver.",
            "The router's radio has failed; replace the router.",
            "The router is dead; ask the maker for a replacement.",
            "The power adapter is broken; buy a new adapter.",
            "The socket has no power; reset the circuit breaker.",
        ],
    ),
    _chart(
        "washer-not-draining",
        "My washing machine does not drain the water at the end of the cycle.",
        [
            "Does the drum still spin during the cycle?",
            "Do you hear the drain pump humming at the end of the cycle?",
            "Does the machine show an error code on its display?",
            "Is the drain hose free of kinks and bends?",
            "Was the filter at the bottom front cleaned in the last month?",
            "Does the display show the code E21?",
            "Is the end of the drain hose placed higher than ninety centimetres?",
        ],
        [
            "The hose outlet is too high; lower the end of the drain hose.",
            "The house standpipe is blocked; clear the standpipe.",
            "The hose is kinked; straighten the drain hose.",
            "A coin jams the pump impeller; remove the object from the pump.",
            "The filter is clogged; clean the drain filter.",
            "The motor belt is broken; replace the drive belt.",
            "The drain pump has failed; replace the drain pump.",
            "The control board is faulty; have a technician replace the board.",
        ],
    ),
    _chart(
        "car-not-starting",
        "My car does not start when I turn the key.",
        [
            "Do the dashboard lights come on when you turn the key?",
            "Does the engine crank when you turn the key?",
            "Are the battery terminals covered in white corrosion?",
            "Does the engine crank slowly, as if it were struggling?",
            "Do you hear a single click from under the hood?",
            "Was the car left unused for more than two weeks?",
            "Is the outside temperature below freezing?",
        ],
        [
            "The cold has thickened the oil; use a block heater or thinner oil.",
            "The battery is weak; recharge or replace the battery.",
            "The fuel pump delivers no fuel; have the fuel pump checked.",
            "The starter solenoid is stuck; replace the starter.",
            "The ignition switch is worn; replace the ignition switch.",
            "The terminals are corroded; clean the battery terminals.",
            "The battery drained while standing; jump-start the car.",
            "The main fuse has blown; replace the main fuse.",
        ],
    ),
)


def flowcharts() -> list[Flowchart]:
    return [parse_flowchart(raw) for raw in CHARTS]


def _rows(variant_name: str) -> Callable[[int, int], list[dict[str, Any]]]:
    variant = VARIANTS[variant_name]

    def rows(n: int, seed: int) -> list[dict[str, Any]]:
        rng = np.random.default_rng(seed)
        pools = [(gold, sets) for gold in gold_faults(flowcharts()) if (sets := candidate_sets(gold, variant))]
        order = rng.permutation(len(pools))
        out = []
        for k in range(n):
            gold, sets = pools[order[k % len(pools)]]
            instance = make_instance(gold, sets[int(rng.integers(len(sets)))], variant, rng)
            out.append({**instance, "split": "audit", "index": k, "seed": int(rng.integers(2**31))})
        return out

    return rows


def _gold_fault(env: FloDialEnv) -> tuple[GoldFault, list[str]]:
    """The oracle's view of the row: the gold fault (with its chart) and the candidates' fault ids."""
    for gold in gold_faults(flowcharts()):
        chart = gold.chart
        if chart.problem != env.problem or chart.faults[gold.fault] != env.candidates[env.gold]:
            continue
        by_text = {text: node for node, text in chart.faults.items()}
        return gold, [by_text[text] for text in env.candidates]
    raise LookupError("the row's flowchart is not one of the audit's")


class Oracle:
    """Which table rows separate which candidates, and which candidates the answers so far leave."""

    def __init__(self, env: FloDialEnv):
        gold, ids = _gold_fault(env)
        self.env = env
        # table row -> the candidates (indices) whose path leaves the gold path there
        self.separates: dict[int, set[int]] = {row: set() for row in range(len(env.table_questions))}
        for index, fault in enumerate(ids):
            if index != env.gold:
                self.separates[gold.divergence[fault]].add(index)

    def possible(self) -> list[int]:
        """The candidates no answered row rules out."""
        out = set(range(self.env.n))
        for row in self.env._asked_rows:
            out -= self.separates[row]
        return sorted(out)

    def posterior(self) -> np.ndarray:
        w = np.zeros(self.env.n)
        w[self.possible()] = 1.0 / len(self.possible())
        return w

    def plan(self) -> list[int]:
        """The unasked table rows: separating ones first, each in table order."""
        rows = [r for r in range(len(self.env.table_questions)) if r not in self.env._asked_rows]
        return sorted(rows, key=lambda r: (not self.separates[r], r))


class _FloDialPolicy:
    """Asks :meth:`question`; states :meth:`belief` after Yes/No and its previous scores after Unknown.
    ``answer_last_update``: once nothing is left to ask, the update is given as the final answer."""

    answer_last_update = False

    def __init__(self) -> None:
        self.oracle: Oracle | None = None
        self.w: np.ndarray | None = None

    def __call__(self, view: View) -> str:
        env: FloDialEnv = view.env  # type: ignore[assignment]
        if self.oracle is None:
            self.oracle = Oracle(env)
            self.w = np.full(env.n, 1.0 / env.n)
        if view.round == "act":
            question = self.question(view, env)
            if question is None:
                return f"<scratch>done</scratch><answer>{vector_text(self.final(view, env))}</answer>"
            return f"<scratch>ask</scratch><interact>{question}</interact>"
        if view.round == "update":
            if env.informative:
                self.w = np.round(self.belief(view, env), 3)
            tag = "answer" if self.answer_last_update and self.question(view, env) is None else "interact"
            return f"<scratch>update</scratch><{tag}>{vector_text(self.w)}</{tag}>"
        return f"<scratch>done</scratch><answer>{vector_text(self.final(view, env))}</answer>"

    def question(self, view: View, env: FloDialEnv) -> str | None:
        assert self.oracle is not None
        plan = self.oracle.plan()
        return env.table_questions[plan[0]] if plan else None

    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        assert self.oracle is not None
        return self.oracle.posterior()

    def final(self, view: View, env: FloDialEnv) -> np.ndarray:
        assert self.w is not None
        return self.w


class Competent(_FloDialPolicy):
    answer_last_update = True


class Stuffing(_FloDialPolicy):
    """Privileged: every table check in one question, in a new order each turn."""

    def question(self, view: View, env: FloDialEnv) -> str | None:
        words = " ".join(q.rstrip("?") for q in env.table_questions).split()
        np.random.default_rng(view.turn).shuffle(words)
        return (" ".join(words))[:290] + "?"


class StuffCandidates(_FloDialPolicy):
    """Every candidate fault's words in one question."""

    def question(self, view: View, env: FloDialEnv) -> str | None:
        words = [w.strip(".,;") for text in env.candidates for w in text.split(";")[0].split()]
        np.random.default_rng(view.turn).shuffle(words)
        return "Is it " + (" ".join(words))[:280] + "?"


class OffTable(_FloDialPolicy):
    """Asks whether each candidate is the fault, in its own words."""

    def question(self, view: View, env: FloDialEnv) -> str | None:
        text = env.candidates[view.turn % env.n].split(";")[0]
        return f"Could it be that {text[0].lower()}{text[1:]}?"


class RepeatReworded(_FloDialPolicy):
    """Privileged: the first table check, then the same check reworded every turn."""

    PADDING = ("Just to confirm,", "Again:", "Let me ask once more,", "Honestly,", "So")

    def question(self, view: View, env: FloDialEnv) -> str | None:
        words = env.table_questions[0].rstrip("?").split()
        if view.turn == 0:
            return env.table_questions[0]
        if view.turn % 2:
            return f"{self.PADDING[view.turn % len(self.PADDING)]} {env.table_questions[0][0].lower()}{env.table_questions[0][1:]}"
        return f"Is it not so that {' '.join(words[1:])}?"


class AnswerEarly(_FloDialPolicy):
    """One check, then the final answer in place of the update (the posterior, ties and all)."""

    def __call__(self, view: View) -> str:
        if view.round == "update":
            env: FloDialEnv = view.env  # type: ignore[assignment]
            assert self.oracle is not None
            return f"<answer>{vector_text(self.oracle.posterior() if env.informative else self.w)}</answer>"
        return super().__call__(view)


class Format(_FloDialPolicy):
    def __call__(self, view: View) -> str:
        env: FloDialEnv = view.env  # type: ignore[assignment]
        question = env.table_questions[view.turn % len(env.table_questions)]
        n = env.n
        if view.round == "act":
            tricks = (
                f"<interact>{question}</interact><interact>{question}</interact>",
                f"<interact>{question}</interact><answer>{', '.join(['0.2'] * n)}</answer>",
                f"<interact>{question}",
                f"<interact>{'? ' * 10}</interact>",
                f"<interact>{question} {'and also this ' * 30}</interact>",
            )
        else:
            tricks = (
                f"<interact>{', '.join(['0.2'] * n)}</interact><interact>{', '.join(['0.2'] * n)}</interact>",
                f"<interact>{', '.join(['2'] * n)}</interact>",
                f"<interact>{', '.join(['0.2'] * (n - 1))}</interact>",
                f"<interact>scores: {', '.join(['0.2'] * n)}</interact>",
                f"<interact>{', '.join(['-0.1'] * n)}</interact>",
            )
        text = tricks[view.turn % len(tricks)]
        return text.replace("interact>", "answer>") if view.round == "answer" else text


class CopyBelief(_FloDialPolicy):
    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        return np.full(env.n, 1.0 / env.n)


class RaiseAll(_FloDialPolicy):
    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        assert self.w is not None
        return np.minimum(self.w + 0.1, 1.0)


class AllOnes(_FloDialPolicy):
    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        return np.ones(env.n)


class RaiseRandom(_FloDialPolicy):
    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        assert self.w is not None
        w = self.w.copy()
        pick = int(np.random.default_rng(view.turn).integers(env.n))
        w[pick] = min(1.0, w[pick] + 0.2)
        return w


class EliminateRandom(_FloDialPolicy):
    """Rules out one random candidate still in play after every answer, the rest shared equally."""

    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        assert self.w is not None
        alive = np.flatnonzero(self.w > 0)
        w = self.w.copy()
        if len(alive) > 1:
            w[alive[int(np.random.default_rng(view.turn).integers(len(alive)))]] = 0.0
        return w / w.sum()


class DecoyOnTop(_FloDialPolicy):
    """Raises the gold's score and share as the competent does, but keeps a decoy (the first other candidate) a step
    above the gold, so the gold is never named."""

    STEP = 0.05

    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        assert self.oracle is not None
        w = np.minimum(self.oracle.posterior(), 1.0 - self.STEP)
        decoy = next(index for index in range(env.n) if index != env.gold)
        w[decoy] = w[env.gold] + self.STEP
        return w


class Oscillate(_FloDialPolicy):
    def belief(self, view: View, env: FloDialEnv) -> np.ndarray:
        a = np.linspace(0.9, 0.1, env.n)
        return a if view.turn % 2 else a[::-1]


class YesOnly(_FloDialPolicy):
    """Privileged: only the table checks answered Yes (then answers); scores as the competent."""

    def question(self, view: View, env: FloDialEnv) -> str | None:
        assert self.oracle is not None
        plan = [r for r in self.oracle.plan() if env.table_answers[r] == "Yes"]
        return env.table_questions[plan[0]] if plan else None


ADVERSARIES: dict[str, Callable[[], Policy]] = {
    "stuffing": Stuffing,
    "stuff_candidates": StuffCandidates,
    "off_table": OffTable,
    "repeat_reworded": RepeatReworded,
    "answer_early": AnswerEarly,
    "format": Format,
    "copy_belief": CopyBelief,
    "raise_all": RaiseAll,
    "all_ones": AllOnes,
    "raise_random": RaiseRandom,
    "eliminate_random": EliminateRandom,
    "oscillate": Oscillate,
    "decoy_on_top": DecoyOnTop,
    "yes_only": YesOnly,
}

AUDITS: tuple[TaskAudit, ...] = tuple(
    TaskAudit(name=name, task=name, rows=_rows(name), competent=Competent, adversaries=dict(ADVERSARIES))
    for name in VARIANTS
)
