"""Variant names, the AReW configs they map to, and the table's reach-time arithmetic."""

from dataclasses import replace

import numpy as np
import pytest

from arew.lab.config import LabConfig, parse_variant
from arew.lab.report import markdown_table, summarise
from arew.lab.train import RunResult
from arew.reporting.report import moving_average


@pytest.mark.parametrize(
    "name, base, method, flip, channels, mode",
    [
        ("ppo-vanilla", "ppo", "vanilla", 0.0, "off", "reweight"),
        ("ppo-as", "ppo", "as", 0.0, "as", "reweight"),
        ("grpo-as+bt", "grpo", "as+bt", 0.0, "as+bt", "reweight"),
        ("grpo-bt-flip0.25", "grpo", "bt", 0.25, "bt", "reweight"),
        ("ppo-ir-flip.3", "ppo", "ir", 0.3, "as+bt", "intermediate_reward"),
    ],
)
def test_variant_names_map_to_project_configs(name, base, method, flip, channels, mode):
    variant = parse_variant(name)
    assert (variant.base, variant.method, variant.flip_prob) == (base, method, flip)
    config = variant.arew_config(lam=0.7, reward_coef=0.2, noise_seed=4)
    assert config.channels == channels and config.mode == mode
    assert config.noise.flip_prob == flip and config.noise.seed == 4
    assert config.lam == 0.7 and config.reward_coef == 0.2 and config.grouping == "pooled"


@pytest.mark.parametrize("name", ["ppo", "ppo-", "sac-as", "ppo-as-bt", "ppo-as+bt-flip2", "ppo-as-flipx", "grpo-AS"])
def test_bad_variant_names_are_rejected(name):
    with pytest.raises(ValueError, match="variant"):
        parse_variant(name)


def test_lab_config_validates_its_knobs():
    with pytest.raises(ValueError, match="step_bins"):
        LabConfig(step_bins=(-1, 0, 1))
    with pytest.raises(ValueError, match="sum to 1"):
        LabConfig(step_bins=(-1, 0, 1), bt_init_probs=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="multiple"):
        LabConfig(episodes_per_step=30, group_size=4)
    with pytest.raises(ValueError, match="variant"):
        LabConfig(variants=("ppo-nothing",))
    with pytest.raises(ValueError, match="grouping"):
        LabConfig(grouping="by-turn")


def test_moving_average_is_trailing():
    assert np.allclose(moving_average([1, 2, 3, 4, 5], 2), [1, 1.5, 2.5, 3.5, 4.5])
    assert np.allclose(moving_average([4, 0, 2], 10), [4, 2, 2])


def result(name: str, seed: int, rewards: list[float]) -> RunResult:
    log = [{"step": i, "reward": r} for i, r in enumerate(rewards)]
    final = {k: float(seed) for k in ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow", "i_as_nats", "oracle_reward")}
    return RunResult(name, seed, log, final, 1.0)


def test_reach_steps_compare_to_vanillas_final_training_reward():
    config = replace(
        LabConfig(), variants=("ppo-vanilla", "ppo-as", "ppo-ir"), seeds=(0, 1), smooth=1, reach_reward=0.5
    )
    results = [
        result("ppo-vanilla", 0, [0.1, 0.2, 0.3, 0.4]),
        result("ppo-vanilla", 1, [0.1, 0.1, 0.2, 0.2]),  # vanilla's final: mean(0.4, 0.2) = 0.3
        result("ppo-as", 0, [0.1, 0.3, 0.6, 0.9]),  # reaches 0.3 at step 2, 0.5 at step 3
        result("ppo-as", 1, [0.35, 0.2, 0.2, 0.2]),  # reaches 0.3 at step 1, never 0.5
        result("ppo-ir", 0, [0.0, 0.0, 0.0, 0.0]),
        result("ppo-ir", 1, [0.0, 0.0, 0.0, 0.1]),
    ]
    rows = {row["variant"]: row for row in summarise(config, results)}
    assert rows["ppo-as"]["vanilla_final_train_reward"] == pytest.approx(0.3)
    assert rows["ppo-as"]["steps_to_vanilla_final"] == pytest.approx(1.5)
    assert rows["ppo-as"]["reached_vanilla_final"] == 2
    assert rows["ppo-as"]["steps_to_reach_reward"] == 3 and rows["ppo-as"]["reached_reach_reward"] == 1
    assert rows["ppo-ir"]["steps_to_vanilla_final"] == "" and rows["ppo-ir"]["reached_vanilla_final"] == 0
    assert rows["ppo-as"]["reward_mean"] == pytest.approx(0.5) and rows["ppo-as"]["reward_std"] == pytest.approx(
        np.std([0, 1], ddof=1)
    )
    table = markdown_table(list(rows.values()))
    assert "| ppo-as | 0.500 ± 0.707 |" in table
    assert "never (0/2)" in table and "2 (2/2)" in table and "3 (1/2)" in table
