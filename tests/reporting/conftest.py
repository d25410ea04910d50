"""Hand-made run folders in the trainer's formats (verl's file logger JSONL, the contract's rollout JSONL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

INJECTION = '</script><script>alert("x")</script><img src=x onerror="document.title=\'owned\'">'


def episode(step: int, reward: float, critiques: list[int], split: str = "train", agent: str = "ask 1 vs 2") -> dict:
    """An episode whose decisions alternate AS, BT with the given environment critiques."""
    turns = [
        {"index": i, "turn": i // 2 + 1, "channel": "as" if i % 2 == 0 else "bt", "agent": f"{agent} #{i}",
         "feedback": f"reply {i}", "critique": z, "applied": z if split == "train" else None,
         "coefficient": 0.25 * z if split == "train" else None}
        for i, z in enumerate(critiques)
    ]  # fmt: skip
    return {"split": split, "step": step, "episode": f"{split}:{step}:{len(critiques)}", "task": "pe-g-s2",
            "data_source": "pe-g-s2", "reward": reward, "failed": None, "prompt": "Find the weights.",
            "numbers": {"decisions": float(len(critiques))}, "turns": turns}  # fmt: skip


def write_run(folder: Path, metrics: list[dict], episodes: list[dict], val: list[dict] = ()) -> Path:
    (folder / "rollouts").mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (folder / "rollouts" / "train.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    if val:
        (folder / "rollouts" / "val.jsonl").write_text("".join(json.dumps(e) + "\n" for e in val))
    return folder


def steps(n: int, offset: float, keys: tuple[str, ...]) -> list[dict]:
    return [{"step": s, "data": {k: offset + 0.1 * s + i for i, k in enumerate(keys)}} for s in range(1, n + 1)]


RUN_A_KEYS = ("critic/score/mean", "episode/proxy_as_mean/mean", "arew/bt/pos", "arew/bt/zero", "arew/bt/neg")
RUN_B_KEYS = ("critic/score/mean", "episode/proxy_bt_mean/mean")


@pytest.fixture
def two_runs(tmp_path) -> list[Path]:
    """Run a: 3 steps, 4 train episodes (one with an injection attempt); run b: 2 steps, 1 train + 1 val episode."""
    a = write_run(
        tmp_path / "runs" / "a",
        steps(3, 0.0, RUN_A_KEYS),
        [
            episode(1, 0.0, [1, -1, 0, 0]),  # AS +1, BT -1: both signs across channels
            episode(2, 1.0, [1, 0, -1, 0]),  # both signs on AS
            episode(3, 0.5, [0, 1, 0, 1]),  # BT +1 only
            episode(3, 0.0, [0, -1, 0, 0], agent=INJECTION),  # a -1 on BT
        ],
    )
    b = write_run(
        tmp_path / "runs" / "b",
        steps(2, 0.5, RUN_B_KEYS),
        [episode(1, 1.0, [0, 0])],
        val=[episode(2, 0.0, [-1, 1], split="val")],
    )
    return [a, b]


@pytest.fixture
def make_episode():
    return episode


@pytest.fixture
def make_run():
    return write_run
