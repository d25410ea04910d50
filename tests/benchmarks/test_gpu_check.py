"""The GPU check (benchmarks/gpu_check.py) on the CPU at a small size, so that it runs when a GPU is at hand: every
computation in the table, the device's results equal to the CPU's, the files it writes. About 10 s (the small
model's training step and generation on both sides)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def gpu_check(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("gpu_check")


def test_the_gpu_check_runs_on_the_cpu_and_writes_its_table(gpu_check, tmp_path):
    figures = gpu_check.main(["--batch", "8", "--length", "256", "--repeats", "1", "--device", "cpu", "--out", str(tmp_path)])
    rows = figures["rows"]
    assert set(rows) == {"grpo (pure torch)", "arew over grpo", "gigpo", "turn-level gae", "turn-level grpo",
                         "small model: training step (loss)", "small model: hf generation (new tokens per row)"}  # fmt: skip
    assert all(row["max_abs_difference"] == 0.0 and row["cpu_ms"] > 0 and row["device_ms"] > 0 for row in rows.values())
    assert rows["grpo (pure torch)"]["x_grpo_on_device"] == 1.0
    table = (tmp_path / "gpu_check.md").read_text()
    assert "| arew over grpo |" in table and "Skipped: no CUDA device" in table
    assert json.loads((tmp_path / "gpu_check.json").read_text())["rows"].keys() == rows.keys()


def test_the_gpu_check_publishes_only_from_a_gpu_and_checks_its_sizes(gpu_check, tmp_path):
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--publish", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        gpu_check.main(["--batch", "6", "--out", str(tmp_path)])


def test_the_pure_torch_grpo_normalises_each_prompts_rollouts(gpu_check):
    import torch

    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    advantages = gpu_check.grpo_advantages(rewards, mask)
    scores = torch.tensor([1.0, 0.0, 1.0, 0.0])
    expected = ((scores - scores.mean()) / (scores.std() + 1e-6)).reshape(-1, 1) * mask
    assert torch.allclose(advantages, expected)
