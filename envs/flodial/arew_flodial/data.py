"""FloDial tasks built from troubleshooting flowcharts, and their verl parquet splits.

A task (one episode): the flowchart's problem description, D = 5 candidate faults (the
gold fault and four other faults *of the same flowchart*, in random order), and the
reference table for the gold fault: the questions on the gold fault's path with the answers
that lead to it (:mod:`arew_flodial.flowchart`). All candidates are plausible for the
problem, since they come from the flowchart the description belongs to.

Easy and Hard. In a flowchart a distractor is ruled out only by the answer to the question
where its path leaves the gold fault's path (every other gold-path question is on a branch
the distractor never reaches). So the number of *separating questions* of a task,

    k = |{ node where the path of d leaves the gold path : d a distractor }|,

is the least number of table questions the agent must get answered to rule out every
distractor by the flowchart's logic (1 <= k <= 4 with D = 5). **Easy**: k <= 2 (one or two
checks settle it). **Hard**: k >= 3 (three or four distinct checks, usually deeper in the
chart, where the candidates are near relatives of the gold fault). For each gold fault the
four distractors are drawn uniformly among the 4-subsets of the flowchart's other faults
with k in the variant's range; faults with the same text as the gold or as each other are
never candidates together.

Splits are by gold fault, so no test fault is ever a training gold: every fault with a path
is ordered (flowchart, node id) and shuffled with ``seed``; the first
:data:`TEST_FRACTION` go to test, the next :data:`VALIDATION_FRACTION` to validation, the
rest to train, the same for both variants. Each split then cycles over its gold faults (in
an order drawn per split) and draws a candidate set not used before for that fault, until
it has its size or runs out (fewer rows, with a warning).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arew.envs.rows import TaskVariant, verl_rows, write_splits
from arew_flodial.flowchart import Flowchart, load_flowcharts

logger = logging.getLogger(__name__)

N_CANDIDATES = 5
MAX_TURNS = 10
TEST_FRACTION = 0.2
VALIDATION_FRACTION = 0.1
SPLITS = ("test", "validation", "train")


@dataclass(frozen=True)
class FloDialVariant(TaskVariant):
    level: str
    min_separating: int
    max_separating: int


VARIANTS = {
    v.name: v
    for v in (
        FloDialVariant("flodial-easy", "easy", 1, 2),
        FloDialVariant("flodial-hard", "hard", 3, N_CANDIDATES - 1),
    )
}


@dataclass(frozen=True)
class GoldFault:
    chart: Flowchart
    fault: str
    path: tuple[tuple[str, str], ...]
    # distractor fault id -> index on the gold path of the question where its path leaves
    divergence: dict[str, int]

    @property
    def key(self) -> tuple[str, str]:
        return self.chart.name, self.fault


def gold_faults(charts: list[Flowchart]) -> list[GoldFault]:
    """Every reachable fault with the divergence points of the other faults of its chart."""
    out = []
    for chart in charts:
        paths = chart.paths()
        for fault, path in paths.items():
            divergence = {}
            seen_texts = {chart.faults[fault].lower()}
            for other, other_path in paths.items():
                text = chart.faults[other].lower()
                if other == fault or text in seen_texts:
                    continue
                seen_texts.add(text)
                shared = 0
                while shared < min(len(path), len(other_path)) and path[shared] == other_path[shared]:
                    shared += 1
                if shared < len(path):
                    divergence[other] = shared
            if path:
                out.append(GoldFault(chart, fault, path, divergence))
    return out


def separating_questions(gold: GoldFault, distractors: tuple[str, ...]) -> int:
    return len({gold.divergence[d] for d in distractors})


def candidate_sets(gold: GoldFault, variant: FloDialVariant) -> list[tuple[str, ...]]:
    """All distractor 4-subsets of ``gold`` whose separating-question count fits ``variant``."""
    pool = list(gold.divergence)
    return [
        combo
        for combo in itertools.combinations(pool, N_CANDIDATES - 1)
        if variant.min_separating <= separating_questions(gold, combo) <= variant.max_separating
    ]


def assign_splits(golds: list[GoldFault], seed: int) -> dict[str, list[GoldFault]]:
    order = np.random.default_rng(seed).permutation(len(golds))
    n_test = round(TEST_FRACTION * len(golds))
    n_val = round(VALIDATION_FRACTION * len(golds))
    shuffled = [golds[k] for k in order]
    return {
        "test": shuffled[:n_test],
        "validation": shuffled[n_test : n_test + n_val],
        "train": shuffled[n_test + n_val :],
    }


def make_instance(
    gold: GoldFault, distractors: tuple[str, ...], variant: FloDialVariant, rng: np.random.Generator
) -> dict:
    """The ``extra_info`` fields that define one episode."""
    chart = gold.chart
    ids = [gold.fault, *distractors]
    order = rng.permutation(len(ids))
    candidate_ids = [ids[k] for k in order]
    return {
        "task": variant.name,
        "variant": variant.level,
        "flowchart": chart.name,
        "problem": chart.problem,
        "candidates": [chart.faults[c] for c in candidate_ids],
        "candidate_ids": candidate_ids,
        "gold_idx": candidate_ids.index(gold.fault),
        "table_questions": [chart.questions[node] for node, _ in gold.path],
        "table_answers": ["Yes" if answer == "yes" else "No" for _, answer in gold.path],
        "separating_questions": separating_questions(gold, distractors),
        "max_turns": MAX_TURNS,
    }


def build_splits(
    charts: list[Flowchart], variant_name: str, n_train: int, n_val: int, n_test: int, seed: int
) -> dict[str, list[dict[str, Any]]]:
    variant = VARIANTS[variant_name]
    by_split = assign_splits(gold_faults(charts), seed)
    sizes = {"test": n_test, "validation": n_val, "train": n_train}
    out: dict[str, list[dict[str, Any]]] = {}
    for code, split in enumerate(SPLITS):
        rng = np.random.default_rng([seed, code, 0 if variant.level == "easy" else 1])
        pools = [(g, candidate_sets(g, variant)) for g in by_split[split]]
        pools = [(g, sets) for g, sets in pools if sets]
        rows: list[dict[str, Any]] = []
        used: dict[tuple[str, str], set[int]] = {}
        turn = [pools[k] for k in rng.permutation(len(pools))]
        while len(rows) < sizes[split] and turn:
            still = []
            for gold, sets in turn:
                if len(rows) >= sizes[split]:
                    still.append((gold, sets))
                    continue
                taken = used.setdefault(gold.key, set())
                free = [i for i in range(len(sets)) if i not in taken]
                pick = free[int(rng.integers(len(free)))]
                taken.add(pick)
                instance = make_instance(gold, sets[pick], variant, rng)
                rows.append({**instance, "split": split, "index": len(rows), "seed": int(rng.integers(2**31))})
                if len(free) > 1:
                    still.append((gold, sets))
            turn = still
        if len(rows) < sizes[split]:
            logger.warning("%s %s: only %d distinct tasks, fewer than %d", variant.name, split, len(rows), sizes[split])
        out[split] = rows
    return out


def build_rows(
    source: str | Path, variant_name: str, n_train: int, n_val: int, n_test: int, seed: int
) -> dict[str, list[dict]]:
    """verl rows per split; ``extra_info`` is all :meth:`FloDialEnv.from_row` needs."""
    from arew_flodial.env import FloDialEnv

    splits = build_splits(load_flowcharts(source), variant_name, n_train, n_val, n_test, seed)
    return verl_rows(splits, FloDialEnv, VARIANTS[variant_name].data_source, lambda info: str(info["gold_idx"] + 1))


def prepare(
    task: str, out_dir: str | Path, *, n_train: int, n_val: int, n_test: int, seed: int, source: str | Path
) -> dict[str, Path]:
    """The registry's data preparation: write ``train``, ``validation`` and ``test`` parquet; return their paths."""
    return write_splits(build_rows(source, task, n_train, n_val, n_test, seed), out_dir)
