"""The lab's critique-accuracy columns and its -adaptive variants."""

import math
from dataclasses import replace

import pytest

from arew.lab.config import QUICK, LabConfig, parse_variant, with_overrides
from arew.lab.train import train_run


def test_adaptive_suffix_turns_the_adaptive_strength_on():
    variant = parse_variant("ppo-as+bt-flip0.3-adaptive")
    assert (variant.method, variant.flip_prob, variant.adaptive) == ("as+bt", 0.3, True)
    config = variant.arew_config(1.0, 0.1, noise_seed=0)
    assert config.adaptive.enabled and config.noise.flip_prob == 0.3
    assert not parse_variant("ppo-as+bt-flip0.3").arew_config(1.0, 0.1, noise_seed=0).adaptive.enabled


@pytest.mark.parametrize("name", ["ppo-ir-adaptive", "grpo-vanilla-adaptive", "ppo-as-adaptive-flip0.3"])
def test_adaptive_needs_an_arew_method_and_comes_last(name):
    with pytest.raises(ValueError, match="bad variant"):
        parse_variant(name)


def test_runs_log_accuracy_and_the_factor_the_rule_gives():
    config = replace(LabConfig(), **{**QUICK, "steps": 2})
    warming = train_run(config, with_overrides("ppo-as+bt-adaptive", {"adaptive": {"warmup_steps": 1}}), 0)
    assert warming.log[0]["as_adaptive_factor"] == 1.0  # global step 1: in the warm-up
    adaptive = train_run(config, with_overrides("ppo-as+bt-adaptive", {"adaptive": {"warmup_steps": 0}}), 0)
    vanilla = train_run(config, parse_variant("ppo-vanilla"), 0)
    for row in adaptive.log:
        for ch in ("as", "bt"):  # every step is scored, unless the critiques or the advantages have one sign only
            accuracy = row[f"{ch}_accuracy"]
            shares = (row[f"{ch}_positive_share"], row[f"{ch}_advantage_positive_share"])
            assert 0 <= accuracy <= 1 or (math.isnan(accuracy) and min(min(s, 1 - s) for s in shares) < 0.05), (ch, row)
        assert row["as_adaptive_factor"] == row["bt_adaptive_factor"]  # pooled: one factor
        assert 0 <= row["as_adaptive_factor"] <= 1
    assert all(math.isnan(row["as_accuracy"]) and math.isnan(row["as_adaptive_factor"]) for row in vanilla.log)
