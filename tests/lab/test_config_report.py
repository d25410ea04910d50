"""Variant names, the AReW configs they map to, the table's reach-time arithmetic and its intervals."""

from dataclasses import replace

import numpy as np
import pytest

from arew.lab.compare import main as compare_main
from arew.lab.config import LabConfig, parse_variant
from arew.lab.report import bootstrap_interval, markdown_table, summarise
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
    final = {
        k: float(seed) for k in ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow", "i_as_nats", "oracle_reward")
    }
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
    assert "| ppo-as | 0.500 [0.000, 1.000] | +0.000 [-1.000, +1.000] | 0.500 ± 0.707 |" in table
    assert "| ppo-vanilla | 0.500 [0.000, 1.000] | - |" in table  # vanilla is the reference of its base
    assert "never (0/2)" in table and "2 (2/2)" in table and "3 (1/2)" in table


def test_the_bootstrap_interval_covers_the_mean_as_the_normal_approximation_says():
    sample = np.random.default_rng(5).normal(0.6, 0.2, 200)
    low, high = bootstrap_interval(sample)
    half = 1.96 * sample.std(ddof=1) / np.sqrt(len(sample))
    assert low == pytest.approx(sample.mean() - half, abs=0.005) and high == pytest.approx(
        sample.mean() + half, abs=0.005
    )
    assert bootstrap_interval(sample) == (low, high)  # a fixed generator: a published interval regenerates exactly
    assert bootstrap_interval([0.3] * 10) == pytest.approx((0.3, 0.3))


def test_a_difference_is_resolved_only_when_its_interval_excludes_zero():
    apart = bootstrap_interval([0.8, 0.82, 0.85, 0.79, 0.81], [0.1, 0.15, 0.12, 0.14, 0.11])
    assert 0.6 < apart[0] < apart[1] < 0.75
    one_collapsed_seed = bootstrap_interval([0.85, 0.86, 0.35], [0.82, 0.81, 0.83])  # the published 3-seed case
    assert one_collapsed_seed[0] < 0 < one_collapsed_seed[1]


def test_the_table_marks_resolved_differences_in_bold():
    config = replace(LabConfig(), variants=("ppo-vanilla", "ppo-as", "ppo-ir"), seeds=(0, 1, 2), smooth=1)
    results = []
    for name, rewards in (
        ("ppo-vanilla", (0.1, 0.12, 0.08)),
        ("ppo-as", (0.9, 0.92, 0.88)),
        ("ppo-ir", (0.0, 0.5, 0.1)),
    ):
        for seed, reward in enumerate(rewards):
            results.append(result(name, seed, [reward]))
            results[-1].final["reward"] = reward
    table = markdown_table(summarise(config, results))
    assert "| ppo-as | 0.900 [0.880, 0.920] | **+0.800 [+0.773, +0.827]** |" in table
    ir = next(line for line in table.splitlines() if line.startswith("| ppo-ir |"))
    assert "**" not in ir  # 0.2 against 0.1 with one seed at 0.5: not resolved


def test_compare_prints_both_arms_and_the_verdict(tmp_path, capsys):
    import json

    for arm, rewards in (("ppo-as", (0.9, 0.92, 0.88)), ("ppo-vanilla", (0.1, 0.12, 0.08))):
        folder = tmp_path / "runs" / arm
        folder.mkdir(parents=True)
        for seed, reward in enumerate(rewards):
            (folder / f"seed{seed}.json").write_text(json.dumps({"final": {"reward": reward}}))
    compare_main([str(tmp_path), "ppo-as", "ppo-vanilla"])
    out = capsys.readouterr().out
    assert "ppo-as: reward 0.900 [95% CI 0.880, 0.920] over 3 seeds" in out
    assert "ppo-as − ppo-vanilla: +0.800 [95% CI +0.773, +0.827]: resolved" in out
    compare_main([str(tmp_path), "ppo-as", "ppo-as"])
    assert "ppo-as − ppo-as: +0.000 [95% CI -0.027, +0.027]: not resolved" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="arms there: ppo-as, ppo-vanilla"):
        compare_main([str(tmp_path), "ppo-ir", "ppo-as"])
