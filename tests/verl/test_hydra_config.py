"""The README's command lines compose with verl's Hydra entry point and resolve to AReW."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arew.configs import CONFIG_PATH

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e  # each test runs main_ppo's command line in a fresh verl process (about 10 s)


def _cfg_job(*args):
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *args, "--cfg", "job"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return yaml.safe_load(result.stdout)


def test_arew_config_composes_with_overrides():
    job = _cfg_job(
        "--config-path", CONFIG_PATH, "--config-name", "arew_trainer",
        "algorithm.adv_estimator=arew_grpo", "algorithm.arew.channels=as", "algorithm.arew.noise.flip_prob=0.2",
    )
    assert job["trainer"]["v1"]["trainer_mode"] == "arew"
    assert job["algorithm"]["adv_estimator"] == "arew_grpo"
    assert job["algorithm"]["arew"]["channels"] == "as"
    assert job["algorithm"]["arew"]["noise"]["flip_prob"] == 0.2
    assert job["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] is not None  # verl's own tree is all there


def test_plain_verl_command_with_two_overrides():
    job = _cfg_job("algorithm.adv_estimator=arew_grpo", "trainer.v1.trainer_mode=arew", "+algorithm.arew.lam=0.2")
    assert job["algorithm"]["adv_estimator"] == "arew_grpo"
    assert job["trainer"]["v1"]["trainer_mode"] == "arew"
    assert job["algorithm"]["arew"] == {"lam": 0.2}
