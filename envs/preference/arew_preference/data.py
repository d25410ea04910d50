"""verl-format parquet files for the PE variants."""

from __future__ import annotations

import json
from pathlib import Path

from arew.envs.rows import verl_rows, write_splits
from arew_preference.env import PreferenceEnv
from arew_preference.generator import VARIANTS, generate_splits


def build_rows(variant: str, n_train: int, n_val: int, n_test: int, seed: int) -> dict[str, list[dict]]:
    """Rows per split, each a verl record whose ``extra_info`` is all ``from_row`` needs."""
    spec = VARIANTS[variant]
    splits = generate_splits(spec, {"train": n_train, "validation": n_val, "test": n_test}, seed)
    return verl_rows(splits, PreferenceEnv, spec.data_source, lambda info: json.dumps(info["w_star"]))


def generate(task: str, sizes: dict[str, int], seed: int) -> dict[str, list[dict]]:
    """The registry's in-memory rows (the CPU lab's training and test tasks): each split's ``extra_info``."""
    return generate_splits(VARIANTS[task], sizes, seed)


def prepare(
    task: str, out_dir: str | Path, *, n_train: int, n_val: int, n_test: int, seed: int, source: None = None
) -> dict[str, Path]:
    """The registry's data preparation: write ``train``, ``validation`` and ``test`` parquet; return their paths."""
    return write_splits(build_rows(task, n_train, n_val, n_test, seed), out_dir)
