"""verl-format parquet files for the PE variants."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from envs.preference.env import PreferenceEnv
from envs.preference.generator import VARIANTS, generate_splits

AGENT_NAME = "arew_agent"
ABILITY = "active_reasoning"


def build_rows(variant: str, n_train: int, n_val: int, n_test: int, seed: int) -> dict[str, list[dict]]:
    """Rows per split, each a verl record whose ``extra_info`` is all ``from_row`` needs."""
    spec = VARIANTS[variant]
    splits = generate_splits(spec, {"train": n_train, "validation": n_val, "test": n_test}, seed)
    out: dict[str, list[dict]] = {}
    for split, instances in splits.items():
        out[split] = [
            {
                "data_source": spec.data_source,
                "prompt": PreferenceEnv.from_row(info, info["seed"]).initial_messages(),
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": json.dumps(info["w_star"])},
                "extra_info": info,
                "agent_name": AGENT_NAME,
            }
            for info in instances
        ]
    return out


def write_parquet(
    variant: str, out_dir: str | Path, n_train: int, n_val: int, n_test: int, seed: int
) -> dict[str, Path]:
    """Write ``train.parquet``, ``validation.parquet`` and ``test.parquet``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, rows in build_rows(variant, n_train, n_val, n_test, seed).items():
        paths[split] = out / f"{split}.parquet"
        pd.DataFrame(rows).to_parquet(paths[split], index=False)
    return paths
