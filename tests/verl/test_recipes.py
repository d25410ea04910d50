"""Every recipe combination composes, carries the paper's settings, and passes verl's own config checks."""

import itertools
import os
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config

from arew.verl_plugin.trainer import validate_arew_setup

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8"]
ALGOS = ["ppo", "grpo", "gspo"]
VARIANTS = {"vanilla": "off", "as_only": "as", "as_bt": "as+bt"}


def _compose(task, algo, variant, model_dir):
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        return compose(
            "recipe", overrides=[f"task={task}", f"algo={algo}", f"variant={variant}", f"actor_rollout_ref.model.path={model_dir}"]
        )


@pytest.mark.parametrize("task, algo, variant", list(itertools.product(TASKS, ALGOS, VARIANTS)))
def test_recipe_composes_with_paper_settings(task, algo, variant, tiny_model_dir):
    cfg = _compose(task, algo, variant, tiny_model_dir)
    validate_arew_setup(cfg)
    actor = cfg.actor_rollout_ref.actor
    assert cfg.algorithm.arew.channels == VARIANTS[variant]
    assert cfg.data.train_files == f"data/{task}/train.parquet"
    assert cfg.trainer.experiment_name == f"{task}-{variant}"
    assert actor.optim.lr == 1e-6 and actor.ppo_mini_batch_size == 128 and cfg.data.train_batch_size == 512
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "arew_agent"
    assert cfg.algorithm.arew.lam == (0.2 if task.startswith("pe-g") else 1.0)
    if algo == "ppo":
        assert cfg.algorithm.adv_estimator == "arew_gae" and cfg.critic.enable and cfg.critic.optim.lr == 1e-5
        assert cfg.actor_rollout_ref.rollout.n == 1 and cfg.trainer.total_training_steps == 200
        assert cfg.algorithm.gamma == 1.0 and cfg.algorithm.lam == 1.0 and actor.clip_ratio == 0.2
    else:
        assert cfg.algorithm.adv_estimator == "arew_grpo" and not cfg.critic.enable
        assert cfg.actor_rollout_ref.rollout.n == 3 and cfg.trainer.total_training_steps == 100
    if algo == "gspo":
        assert actor.policy_loss.loss_mode == "gspo" and actor.loss_agg_mode == "seq-mean-token-mean"
        assert actor.clip_ratio_low == 3e-4 and actor.clip_ratio_high == 4e-4


@pytest.mark.parametrize("algo", ALGOS)
def test_recipe_passes_verl_validation(algo, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = _compose("pe-g-s2", algo, "as_bt", tiny_model_dir)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_train_script_prepares_data_and_calls_verl(tmp_path):
    """recipes/train.sh with a stand-in python: data is prepared, verl gets the recipe and the overrides."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text('#!/usr/bin/env bash\necho "$@" > "$AREW_TEST_ARGS"\n')
    (fake_bin / "python").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "AREW_DATA_DIR": str(tmp_path / "data"),
        "AREW_TEST_ARGS": str(tmp_path / "args"),
    }
    result = subprocess.run(
        ["bash", str(ROOT / "recipes" / "train.sh"), "pe-f-d6", "gspo", "as_only", "trainer.total_training_steps=3"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "pe-f-d6" / "train.parquet").exists()
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["-m", "verl.trainer.main_ppo"]
    assert args[-4:] == ["task=pe-f-d6", "algo=gspo", "variant=as_only", "trainer.total_training_steps=3"]
