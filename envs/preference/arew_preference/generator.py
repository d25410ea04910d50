"""Synthetic PE instances: ten movies with 1-5 attribute scores and a hidden preference.

Choices the paper leaves open, fixed here:

- attribute scores are integers 1..5 (ratings), so ties and dominated pairs occur and the
  user can answer "Equal"; the ten items of an instance are distinct;
- w* is uniform on [0,1]^D rounded to two decimals (exact ties stay exact in float
  arithmetic up to ~1e-15, far below the 0.01 resolution), and is redrawn while the
  all-0.5 default already has cos(0.5*1, w*) > :data:`MAX_BASE_COS`: the paper's binary
  reward needs a gain of 0.03 over that default, so without the bound about 4% of PE-G
  tasks would be unwinnable, and the PE-F normalisation 1/(1 - base) stays bounded;
- PE-G uses D = 6 for both S = 2 and S = 3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arew.envs.rows import TaskVariant

N_ITEMS = 10
SCORE_RANGE = (1, 5)
MAX_BASE_COS = 0.95
WEIGHT_DECIMALS = 2
ATTRIBUTE_NAMES = ("action", "comedy", "drama", "romance", "sci-fi", "horror", "animation", "documentary")


@dataclass(frozen=True)
class PEVariant(TaskVariant):
    n_attrs: int
    subset_size: int
    max_turns: int
    reward_kind: str  # "binary" (PE-G) or "continuous" (PE-F)


VARIANTS = {
    v.name: v
    for v in (
        PEVariant("pe-g-s2", n_attrs=6, subset_size=2, max_turns=10, reward_kind="binary"),
        PEVariant("pe-g-s3", n_attrs=6, subset_size=3, max_turns=10, reward_kind="binary"),
        PEVariant("pe-f-d6", n_attrs=6, subset_size=6, max_turns=12, reward_kind="continuous"),
        PEVariant("pe-f-d8", n_attrs=8, subset_size=8, max_turns=12, reward_kind="continuous"),
    )
}


def default_cosine(w: np.ndarray) -> np.ndarray:
    """cos(0.5*1, w) row-wise: the similarity of the all-0.5 starting guess."""
    w = np.atleast_2d(w)
    norm = np.linalg.norm(w, axis=1)
    return w.sum(axis=1) / (np.sqrt(w.shape[1]) * np.where(norm > 0, norm, np.inf))


def sample_preferences(rng: np.random.Generator, n: int, n_attrs: int) -> np.ndarray:
    """``n`` draws of w* from the task prior, shape (n, n_attrs)."""
    kept = np.empty((0, n_attrs))
    while len(kept) < n:
        draw = np.round(rng.random((2 * (n - len(kept)) + 8, n_attrs)), WEIGHT_DECIMALS)
        ok = (draw.sum(axis=1) > 0) & (default_cosine(draw) <= MAX_BASE_COS)
        kept = np.concatenate([kept, draw[ok]])
    return kept[:n]


def sample_items(rng: np.random.Generator, n_attrs: int, n_items: int = N_ITEMS) -> np.ndarray:
    """``n_items`` distinct integer score vectors, shape (n_items, n_attrs)."""
    low, high = SCORE_RANGE
    while True:
        items = rng.integers(low, high + 1, size=(n_items, n_attrs))
        if len(np.unique(items, axis=0)) == n_items:
            return items


def generate_instance(variant: PEVariant, rng: np.random.Generator) -> dict:
    """The ``extra_info`` fields that define one episode (JSON/parquet friendly)."""
    items = sample_items(rng, variant.n_attrs)
    w_star = sample_preferences(rng, 1, variant.n_attrs)[0]
    return {
        "task": variant.name,
        "items": items.tolist(),
        "w_star": [float(x) for x in w_star],
        "attribute_names": list(ATTRIBUTE_NAMES[: variant.n_attrs]),
        "subset_size": variant.subset_size,
        "max_turns": variant.max_turns,
        "reward_kind": variant.reward_kind,
    }


def instance_key(instance: dict) -> tuple:
    return tuple(map(tuple, instance["items"])), tuple(instance["w_star"])


SPLIT_CODES = {"test": 0, "validation": 1, "train": 2}


def generate_splits(variant: PEVariant, sizes: dict[str, int], seed: int) -> dict[str, list[dict]]:
    """Disjoint splits; each split's stream depends only on (seed, split name).

    Splits are drawn test first, then validation, then train, each skipping instances already
    drawn, so growing the training set never changes the evaluation sets.
    """
    seen: set[tuple] = set()
    splits: dict[str, list[dict]] = {}
    for split in sorted(sizes, key=SPLIT_CODES.__getitem__):
        rng = np.random.default_rng([seed, SPLIT_CODES[split]])
        rows: list[dict] = []
        while len(rows) < sizes[split]:
            instance = generate_instance(variant, rng)
            key = instance_key(instance)
            if key in seen:
                continue
            seen.add(key)
            rows.append({**instance, "split": split, "index": len(rows), "seed": int(rng.integers(2**31))})
        splits[split] = rows
    return splits
