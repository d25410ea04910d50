"""``recipes/train.sh --dry-run``: every recipe's layout resolved and checked with no GPU, no data and no model files,
with the resources it needs (:mod:`arew.verl_plugin.dry_run`)."""

import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest

from arew.configs import group_options
from arew.verl_plugin.dry_run import PAPER_TASKS, from_arguments, main, parse_arguments
from docgen.recipe_resources import page_text

ROOT = Path(__file__).resolve().parents[2]
TRAIN_SH = ROOT / "recipes" / "train.sh"
RESOURCES_PAGE = ROOT / "docs" / "guides" / "recipes.md"
VARIANTS = {"vanilla": "off", "as_only": "as", "as_bt": "as+bt"}
ESTIMATORS = {"ppo": "arew_gae", "grpo": "arew_grpo", "gspo": "arew_grpo", "gigpo": "arew_gigpo", "turn_gae": "arew_turn_gae", "turn_grpo": "arew_turn_grpo"}
USER_TASKS = ("mediq", "flodial-easy", "flodial-hard", "tau2-dual")
# what the environment may hold that changes a layout or a model; the tests set what they need
LAYOUT_VARIABLES = ("AREW_NNODES", "AREW_GPUS_PER_NODE", "AREW_USER_SERVICE", "AREW_USER_URL", "AREW_USER_TP", "AREW_USER_GPUS",
                    "AREW_TRAIN_GPUS", "AREW_MODEL_PATH", "AREW_USER_MODEL", "CUDA_VISIBLE_DEVICES")  # fmt: skip


def _environment(tmp_path, **variables):
    """This environment without layout settings, data and run folders of the test's own, nothing downloaded."""
    env = {name: value for name, value in os.environ.items() if name not in LAYOUT_VARIABLES}
    return {**env, "AREW_DATA_DIR": str(tmp_path / "data"), "AREW_RUN_DIR": str(tmp_path / "runs"), "HF_HUB_OFFLINE": "1", **variables}


def _dry_run_arguments(tmp_path, task):
    """The arguments ``recipes/train.sh --dry-run TASK ppo vanilla`` hands the dry-run module at its default layout,
    read through a stand-in python that writes them one a line."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "python").write_text("#!/usr/bin/env bash\nprintf '%s\\n' \"$@\" > \"$AREW_TEST_ARGS\"\n")
    (fake_bin / "python").chmod(0o755)
    env = _environment(tmp_path, PATH=f"{fake_bin}:{os.environ['PATH']}", AREW_TEST_ARGS=str(tmp_path / "args"))
    done = subprocess.run(["bash", str(TRAIN_SH), "--dry-run", task, "ppo", "vanilla"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    arguments = (tmp_path / "args").read_text().splitlines()
    assert arguments[:2] == ["-m", "arew.verl_plugin.dry_run"]
    return arguments[2:]


def _train_sh_dry_run(tmp_path, *arguments, **variables):
    return subprocess.run(["bash", str(TRAIN_SH), "--dry-run", *arguments], env=_environment(tmp_path, **variables),
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.e2e
def test_every_recipe_passes_the_dry_run_at_the_one_node_layout(tmp_path, monkeypatch):
    """Every task's layout with every algorithm (9 x 6, the as_bt variant) and every variant of one task through the
    dry-run module in this process, each with the arguments recipes/train.sh passes at its default one-node layout; and
    the resource table of docs/guides/recipes.md is what the module makes of them. A variant sets only
    ``algorithm.arew.channels`` and the experiment's name, which no layout check reads (tests/verl/test_recipes.py
    composes every variant of every task). It costs about 0.8 s of one core a recipe (Hydra composing verl's config,
    0.45 s; the checks, most of the rest), about a minute for the 66: the e2e tier's, as the fast tier's 3 minutes have
    no room."""
    for name in LAYOUT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    table_runs = []
    for task in PAPER_TASKS:
        layout = _dry_run_arguments(tmp_path, task)
        user_task = task in USER_TASKS
        variants = VARIANTS.items() if task == PAPER_TASKS[0] else [("as_bt", VARIANTS["as_bt"])]
        for algo, (variant, channels) in itertools.product(group_options("algo"), variants):
            arguments = [{"algo=ppo": f"algo={algo}", "variant=vanilla": f"variant={variant}"}.get(arg, arg) for arg in layout]
            run = from_arguments(parse_arguments(arguments))
            run.check()
            report = "\n".join([*run.heading(), *run.outcome()])
            critic = algo in ("ppo", "turn_gae")
            expected = [
                f"dry run      task={task} algo={algo} variant={variant}",
                f"estimator    algorithm.adv_estimator={ESTIMATORS[algo]}, algorithm.arew.channels={channels}; "
                f"critic {'on' if critic else 'off'}, reference policy {'on' if task == 'tau2-dual' else 'off'}",
                "1 node x 7 training GPUs (trainer.nnodes=1, trainer.n_gpus_per_node=7, CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6) + 1 user-server GPU = 8 GPUs"
                if user_task else "1 node x 8 training GPUs (trainer.nnodes=1, trainer.n_gpus_per_node=8) = 8 GPUs",
                "Qwen/Qwen2.5-14B-Instruct, started by launch/user_server.sh on GPU 7 of this node" if user_task else "user server  none",
                "data.train_batch_size=252, actor_rollout_ref.actor.ppo_mini_batch_size=126" if user_task
                else f"data.train_batch_size={512 if task.startswith('pe') else 256}, actor_rollout_ref.actor.ppo_mini_batch_size=128",
                f"actor_rollout_ref.rollout.n={1 if critic else 3}",
                "checks       passed",
                "skipped      the data files",
                "a stand-in for critic.model.path" if critic else "the model's files: none read",
                f"estimates in GiB (2^30 bytes), for Qwen/Qwen2.5-{'14' if task == 'tau2-dual' else '7'}B-Instruct",
                "formula      ",
            ]  # fmt: skip
            for line in expected:
                assert line in report, (line, report)
            roles = re.search(r"FSDP \d+ \((.*?)\);", report).group(1)  # e.g. "actor 8 + critic 16"
            assert ("critic" in roles, "reference" in roles) == (critic, task == "tau2-dual"), roles
            if variant == "as_bt":
                table_runs.append(run)
    assert page_text(table_runs) == RESOURCES_PAGE.read_text(), "regenerate: python -m docgen.recipe_resources"


def test_a_layout_that_does_not_split_fails_naming_the_key(capsys):
    assert main(["task=mediq", "algo=grpo", "variant=as_bt", "trainer.n_gpus_per_node=5"]) == 1
    captured = capsys.readouterr()
    assert "layout       1 node x 5 training GPUs" in captured.out
    assert "dry run failed: data.train_batch_size: 252 * actor_rollout_ref.rollout.n 3 = 756 samples do not split" in captured.err


def test_per_task_critique_settings_are_checked_against_the_recipes_task(capsys):
    """The dry run reads no data file, so the recipe's task stands in for the tasks the files would name."""
    assert main(["task=mediq", "algo=grpo", "+arew_agent.critiques.tasks={mediq: {source: null}}"]) == 0
    assert main(["task=mediq", "algo=grpo", "+arew_agent.critiques.tasks={pe-g-s2: {source: null}}"]) == 1
    assert "arew_agent.critiques.tasks: ['pe-g-s2'] are not tasks of this run (['mediq'])" in capsys.readouterr().err


def test_a_model_outside_the_table_is_checked_without_its_files_and_gets_no_estimate(capsys):
    """PPO's critic check would load the model's config and tokenizer: the stand-in takes their place."""
    assert main(["task=pe-g-s2", "algo=ppo", "actor_rollout_ref.model.path=nobody/Not-A-Model"]) == 0
    out = capsys.readouterr().out
    assert "no estimate: nobody/Not-A-Model is not in the table of the paper's models" in out
    assert "a stand-in for critic.model.path" in out


@pytest.mark.e2e
def test_train_sh_dry_run_on_one_node_prepares_and_starts_nothing(tmp_path):
    """A fresh process importing verl (10-20 s on 2 cores), as every test below that runs the module. AREW_USER_SERVICE=script
    (the default on one node, said explicitly) reaches the trainer as arew_user_service.mode=external."""
    done = _train_sh_dry_run(tmp_path, "mediq", "grpo", "as_bt", "trainer.total_training_steps=3", AREW_USER_SERVICE="script")
    assert done.returncode == 0, done.stderr
    for line in ("layout       1 node x 7 training GPUs (trainer.nnodes=1, trainer.n_gpus_per_node=7, CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6) + 1 user-server GPU = 8 GPUs",
                 "user server  Qwen/Qwen2.5-14B-Instruct, started by launch/user_server.sh on GPU 7 of this node",
                 "(756 episodes a step, 2 mini-batches)", "checks       passed", "user server: Qwen/Qwen2.5-14B-Instruct (bf16 weights 28 per GPU), on 1 GPU"):  # fmt: skip
        assert line in done.stdout, (line, done.stdout)
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


@pytest.mark.e2e
def test_train_sh_dry_run_scales_pe_to_two_nodes(tmp_path):
    done = _train_sh_dry_run(tmp_path, "pe-g-s2", "gspo", "vanilla", AREW_NNODES="2")
    assert done.returncode == 0, done.stderr
    assert "layout       2 nodes x 8 training GPUs (trainer.nnodes=2, trainer.n_gpus_per_node=8) = 16 GPUs" in done.stdout
    assert "data.train_batch_size=512, actor_rollout_ref.actor.ppo_mini_batch_size=128" in done.stdout
    assert "per training GPU (G = 16): FSDP 4 (actor 4)" in done.stdout


@pytest.mark.e2e
def test_train_sh_dry_run_puts_mediqs_user_server_on_ray_for_four_nodes(tmp_path):
    done = _train_sh_dry_run(tmp_path, "mediq", "ppo", "as_bt", AREW_NNODES="4")
    assert done.returncode == 0, done.stderr
    for line in ("layout       4 nodes x 7 training GPUs (trainer.nnodes=4, trainer.n_gpus_per_node=7) + 1 user-server GPU: 29 of the Ray cluster's 4 x 8",
                 "started by AReW's Ray service (arew_user_service.replicas=1 x tensor_parallel_size=1)",
                 "data.train_batch_size=224, actor_rollout_ref.actor.ppo_mini_batch_size=112", "3 GPUs stay idle", "the Ray service's GPU budget"):  # fmt: skip
        assert line in done.stdout, (line, done.stdout)


@pytest.mark.e2e
def test_train_sh_dry_run_refuses_user_servers_that_leave_no_room_naming_the_keys(tmp_path):
    """Three user-server replicas beside 2 x 7 training GPUs on two 8-GPU nodes: the Ray service's start-up check, which a
    real run reaches only once Ray is up; a local server on several nodes is refused by the script itself."""
    done = _train_sh_dry_run(tmp_path, "mediq", "grpo", "as_bt", "arew_user_service.replicas=3", AREW_NNODES="2")
    assert done.returncode == 1
    assert "dry run failed: trainer.nnodes * trainer.n_gpus_per_node = 14 training GPUs + arew_user_service.replicas" in done.stderr
    assert "= 17, but the Ray cluster has 16 GPUs" in done.stderr
    local = _train_sh_dry_run(tmp_path, "mediq", "grpo", "as_bt", AREW_NNODES="2", AREW_USER_SERVICE="script")
    assert local.returncode == 2 and "AREW_USER_SERVICE=ray or AREW_USER_URL" in local.stderr
