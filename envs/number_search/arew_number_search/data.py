"""The task's verl parquet splits: synthetic secrets, seeded, the same for every run with the same seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from arew.envs.rows import TaskVariant, verl_rows, write_splits
from arew_number_search.env import NumberSearchEnv

N_CANDIDATES = 8
MAX_TURNS = 4


def prepare(
    task: str, out_dir: str | Path, *, n_train: int, n_val: int, n_test: int, seed: int, source: None = None
) -> dict[str, Path]:
    """AReW's data-preparation hook (``arew prepare number-search --out DIR``)."""
    rng = np.random.default_rng(seed)
    splits = {
        split: [
            {
                "task": task,
                "split": split,
                "index": index,
                "secret": int(rng.integers(1, N_CANDIDATES + 1)),
                "n_candidates": N_CANDIDATES,
                "max_turns": MAX_TURNS,
                "seed": int(rng.integers(2**31)),
            }
            for index in range(size)
        ]
        for split, size in (("train", n_train), ("validation", n_val), ("test", n_test))
    }
    rows = verl_rows(splits, NumberSearchEnv, TaskVariant(task).data_source, lambda info: str(info["secret"]))
    return write_splits(rows, out_dir)
