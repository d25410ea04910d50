"""Every recipe combination composes, carries the paper's settings, and passes verl's own config checks."""

import itertools
import os
import subprocess
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config

from arew.configs import CONFIG_DIR
from arew.verl_plugin.trainer import validate_arew_setup

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8", "mediq", "flodial-easy", "flodial-hard"]
LAMBDAS = {"pe-g": 0.2, "pe-f": 1.0, "medi": 1.0, "flod": 0.5}
ALGOS = ["ppo", "grpo", "gspo"]
CREDIT_ALGOS = {"gigpo": "arew_gigpo", "turn_gae": "arew_turn_gae", "turn_grpo": "arew_turn_grpo"}  # arew.core.credit
VARIANTS = {"vanilla": "off", "as_only": "as", "as_bt": "as+bt"}


def _compose(task, algo, variant, model_dir):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
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
    assert actor.optim.lr == 1e-6 and cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "arew_agent"
    assert cfg.algorithm.arew.lam == LAMBDAS[task[:4]] and cfg.algorithm.arew.weighting == "minority_fixed"
    if task.startswith("pe"):
        assert actor.ppo_mini_batch_size == 128 and cfg.data.train_batch_size == 512
    else:  # one GPU serves the simulated user, seven train
        assert cfg.trainer.n_gpus_per_node == 7 and cfg.data.train_batch_size % 7 == 0 and actor.ppo_mini_batch_size % 7 == 0
        assert cfg.arew_agent.env_options.user == "llm"
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


@pytest.mark.parametrize("task, algo, variant", list(itertools.product(["tau2-solo", "tau2-dual"], ALGOS, VARIANTS)))
def test_tau2_recipes_carry_the_references_settings(task, algo, variant, tiny_model_dir):
    cfg = _compose(task, algo, variant, tiny_model_dir)
    validate_arew_setup(cfg)
    arew, actor = cfg.algorithm.arew, cfg.actor_rollout_ref.actor
    assert arew.channels == VARIANTS[variant] and arew.weighting == "step_abs_sum" and arew.negatives == "full"
    assert cfg.data.train_files == f"data/{task}/train.parquet" and cfg.trainer.experiment_name == f"{task}-{variant}"
    if task == "tau2-solo":
        assert arew.lam == 5.0 and cfg.trainer.n_gpus_per_node == 8 and cfg.data.train_batch_size == 256
    else:  # the task's settings win over the algorithm's (its group comes last)
        assert arew.lam == 50.0 and cfg.trainer.total_training_steps == 150 and cfg.arew_agent.env_options.max_turns == 22
        assert actor.use_kl_loss and actor.kl_loss_coef == 0.001 and cfg.arew_agent.env_options.customer == "llm"
        assert cfg.trainer.n_gpus_per_node == 7 and cfg.data.train_batch_size % 7 == 0 and actor.ppo_mini_batch_size % 7 == 0


def test_tau2_dual_trains_the_14b_agent_by_default(monkeypatch):
    monkeypatch.delenv("AREW_MODEL_PATH", raising=False)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose("recipe", overrides=["task=tau2-dual", "algo=grpo"])
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2.5-14B-Instruct"


@pytest.mark.parametrize("task, algo, variant", list(itertools.product(["pe-g-s2", "mediq", "tau2-solo"], CREDIT_ALGOS, VARIANTS)))
def test_credit_baseline_recipes_compose_alone_and_under_arew(task, algo, variant, tiny_model_dir):
    cfg = _compose(task, algo, variant, tiny_model_dir)
    validate_arew_setup(cfg)
    assert cfg.algorithm.adv_estimator == CREDIT_ALGOS[algo] and cfg.algorithm.arew.channels == VARIANTS[variant]
    critic = algo == "turn_gae"
    assert cfg.critic.enable == critic and cfg.actor_rollout_ref.rollout.n == (1 if critic else 3)
    assert cfg.algorithm.arew.credit.turn_norm == "pooled" and cfg.algorithm.arew.credit.gigpo_match == "exact"


def test_a_plain_credit_estimator_name_is_refused_with_the_arew_names(tiny_model_dir):
    cfg = _compose("pe-g-s2", "gigpo", "vanilla", tiny_model_dir)
    cfg.algorithm.adv_estimator = "gigpo"
    with pytest.raises(ValueError, match="arew_gigpo.*channels=off"):
        validate_arew_setup(cfg)


def test_turn_gae_without_the_critic_is_refused(tiny_model_dir):
    cfg = _compose("pe-g-s2", "turn_gae", "as_bt", tiny_model_dir)
    cfg.critic.enable = False
    with pytest.raises(ValueError, match="critic.enable: arew_turn_gae needs the critic"):
        validate_arew_setup(cfg)


def test_no_reward_workers_pass_only_with_the_arew_agent_loop_and_no_reward_model(tiny_model_dir, monkeypatch):
    """The CPU backend starts no reward-loop worker (AReW's agent loop scores its episodes); a run that would need one
    stops at start-up naming reward.num_workers."""
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose("recipe", overrides=["task=pe-g-s2", "algo=grpo", "+backend=cpu", f"actor_rollout_ref.model.path={tiny_model_dir}"])
    assert cfg.reward.num_workers == 0
    validate_arew_setup(cfg)
    cfg.reward.reward_model.enable = True
    with pytest.raises(ValueError, match="reward.num_workers: 0 .* reward.reward_model.enable=true needs one"):
        validate_arew_setup(cfg)
    cfg.reward.reward_model.enable = False
    cfg.actor_rollout_ref.rollout.agent.default_agent_loop = "single_turn_agent"
    with pytest.raises(ValueError, match="reward.num_workers: 0 .* only 'arew_agent'"):
        validate_arew_setup(cfg)
    cfg.reward.num_workers = 1
    validate_arew_setup(cfg)


def test_the_cpu_backends_fsdp_engines_compute_in_fp32(tiny_model_dir, monkeypatch):
    """verl's FSDP engine casts the parameters to its mixed-precision param dtype and autocasts the forward to it,
    bf16 when the config has no mixed_precision section, whatever model_dtype and dtype say: the actor, the reference
    and the critic of a CPU run each carry one that verl reads as fp32."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.torch_dtypes import PrecisionType

    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose("recipe", overrides=["task=pe-g-s2", "algo=ppo", "+backend=cpu", f"actor_rollout_ref.model.path={tiny_model_dir}"])
    for engine in (cfg.actor_rollout_ref.actor.fsdp_config, cfg.actor_rollout_ref.ref.fsdp_config, cfg.critic.fsdp):
        precision = omega_conf_to_dataclass(engine).mixed_precision
        assert precision is not None
        assert {PrecisionType.to_dtype(precision.get(key, "bf16")) for key in ("param_dtype", "reduce_dtype", "buffer_dtype")} == {torch.float32}


@pytest.mark.parametrize("algo", [*ALGOS, *CREDIT_ALGOS])
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


def test_train_script_starts_the_user_server_for_mediq(tmp_path, process_alive):
    """MediQ: data from the given jsonl, a healthy user server started first, its URL handed to training."""
    import json
    import sys

    cases = [
        {
            "id": i, "question": "Which diagnosis is most likely?",
            "context": [f"A {20 + i}-year-old man has a cough.", "He smokes."],
            "options": {"A": "Asthma", "B": "Pneumonia", "C": "Bronchitis", "D": "Tuberculosis"},
            "answer": "Pneumonia", "answer_idx": "B",
            "facts": [f"Patient is a {20 + i}-year-old man.", "He has a fever.", "He has night sweats.", "His sputum is rusty."],
        }
        for i in range(12)
    ]
    source = tmp_path / "mediq.jsonl"
    source.write_text("\n".join(json.dumps(c) for c in cases))
    fake_bin, www = tmp_path / "bin", tmp_path / "www"
    fake_bin.mkdir()
    www.mkdir()
    (www / "health").write_text("ok")
    (fake_bin / "python").write_text('#!/usr/bin/env bash\necho "AREW_USER_URL=$AREW_USER_URL GPUS=$CUDA_VISIBLE_DEVICES $@" > "$AREW_TEST_ARGS"\n')
    (fake_bin / "python").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "AREW_DATA_DIR": str(tmp_path / "data"),
        "AREW_RUN_DIR": str(tmp_path / "runs"),
        "AREW_TEST_ARGS": str(tmp_path / "args"),
        "AREW_MEDIQ_SOURCE": str(source),
        "AREW_PREPARE_ARGS": "--n-train 6 --n-val 2 --n-test 2",
        "AREW_USER_PORT": "18931",
        "AREW_USER_SERVER_CMD": f"{sys.executable} -m http.server $PORT --bind 127.0.0.1 --directory {www}",
    }
    env.pop("AREW_USER_URL", None)
    result = subprocess.run(
        ["bash", str(ROOT / "recipes" / "train.sh"), "mediq", "grpo", "as_bt"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "mediq" / "train.parquet").exists()
    args = (tmp_path / "args").read_text()
    assert ":18931/v1" in args.split()[0] and "GPUS=0,1,2,3,4,5,6" in args
    assert "task=mediq" in args
    pid = int((tmp_path / "runs" / "user_server" / "server.pid").read_text())
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:  # the recipe stops the server it started
        time.sleep(0.1)
    assert not process_alive(pid)


def _train_sh_args(tmp_path, task, extra_env, mediq_source=None):
    """recipes/train.sh with a stand-in python; the Hydra arguments it passed to verl."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "python").write_text('#!/usr/bin/env bash\necho "GPUS=${CUDA_VISIBLE_DEVICES:-unset} $@" > "$AREW_TEST_ARGS"\n')
    (fake_bin / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "AREW_DATA_DIR": str(tmp_path / "data"),
           "AREW_TEST_ARGS": str(tmp_path / "args"), "AREW_PREPARE_ARGS": "--n-train 6 --n-val 2 --n-test 2", **extra_env}  # fmt: skip
    for name in ("AREW_USER_URL", "AREW_USER_SERVICE", "CUDA_VISIBLE_DEVICES"):
        if name not in extra_env:
            env.pop(name, None)
    if mediq_source:
        env["AREW_MEDIQ_SOURCE"] = str(mediq_source)
    result = subprocess.run(["bash", str(ROOT / "recipes" / "train.sh"), task, "grpo", "as_bt"], env=env, capture_output=True, text=True, timeout=300)
    return result, (tmp_path / "args").read_text().split() if result.returncode == 0 else []


def test_train_script_scales_pe_to_two_nodes(tmp_path):
    result, args = _train_sh_args(tmp_path, "pe-g-s2", {"AREW_NNODES": "2"})
    assert result.returncode == 0, result.stderr
    for arg in ("GPUS=unset", "trainer.nnodes=2", "trainer.n_gpus_per_node=8", "data.train_batch_size=512", "actor_rollout_ref.actor.ppo_mini_batch_size=128"):
        assert arg in args, arg


def test_train_script_puts_the_user_server_on_ray_for_four_nodes(tmp_path, mediq_source):
    result, args = _train_sh_args(tmp_path, "mediq", {"AREW_NNODES": "4"}, mediq_source)
    assert result.returncode == 0, result.stderr
    for arg in ("GPUS=unset", "arew_user_service.mode=ray", "arew_user_service.tensor_parallel_size=1", "trainer.nnodes=4",
                "trainer.n_gpus_per_node=7", "data.train_batch_size=224", "actor_rollout_ref.actor.ppo_mini_batch_size=112"):  # fmt: skip
        assert arg in args, arg
    assert not (tmp_path / "runs").exists()  # no local user server


def test_train_script_rejects_a_local_user_server_on_several_nodes(tmp_path, mediq_source):
    result, _ = _train_sh_args(tmp_path, "mediq", {"AREW_NNODES": "2", "AREW_USER_SERVICE": "script"}, mediq_source)
    assert result.returncode == 2 and "AREW_USER_SERVICE=ray or AREW_USER_URL" in result.stderr


@pytest.mark.parametrize("nnodes, batch, mini", [(2, 252, 126), (4, 224, 112)])
def test_multi_node_user_task_layouts_pass_the_start_up_checks(nnodes, batch, mini, tiny_model_dir):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose("recipe", overrides=["task=mediq", "algo=grpo", f"actor_rollout_ref.model.path={tiny_model_dir}", f"trainer.nnodes={nnodes}",
                                           f"data.train_batch_size={batch}", f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}", "arew_user_service.mode=ray"])  # fmt: skip
    validate_arew_setup(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_start_up_names_the_batch_key_that_does_not_split(tiny_model_dir):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose("recipe", overrides=["task=mediq", "algo=ppo", f"actor_rollout_ref.model.path={tiny_model_dir}", "trainer.nnodes=4"])
    with pytest.raises(ValueError, match=r"actor_rollout_ref.actor.ppo_mini_batch_size: 126 .* 28 training GPUs; use a multiple of 28 \(e.g. 112\)"):
        validate_arew_setup(cfg)
