"""Config validation names the key; the documented YAML defaults are the code's defaults."""

from pathlib import Path

import pytest
import yaml

from arew.configs import CONFIG_DIR
from arew.core import AReWConfig, AReWConfigError, parse_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"channels": "all"}, "algorithm.arew.channels"),
        ({"lam": -1}, "algorithm.arew.lam"),
        ({"lam": "big"}, "algorithm.arew.lam"),
        ({"lam": float("nan")}, "algorithm.arew.lam"),
        ({"weighting": "tokens"}, "algorithm.arew.weighting"),
        ({"negatives": "middle"}, "algorithm.arew.negatives"),
        ({"weighting": "step_abs_sum", "negatives": 1}, "algorithm.arew.negatives"),
        ({"weighting": "abs_sum", "negatives": "prefix"}, "algorithm.arew.negatives"),
        ({"negatives": "suffix"}, "algorithm.arew.negatives"),
        ({"noise": {"flip_prob": 1.5}}, "algorithm.arew.noise.flip_prob"),
        ({"noise": {"flips": 0.1}}, "algorithm.arew.noise.flips"),
        ({"window": {"fill": 2}}, "algorithm.arew.window.fill"),
        ({"window": {"keep": "middle"}}, "algorithm.arew.window.keep"),
        ({"schedule": {"start_step": 5, "end_step": 5}}, "algorithm.arew.schedule.end_step"),
        ({"schedule": {"warmup_steps": 1.5}}, "algorithm.arew.schedule.warmup_steps"),
        ({"lam_as": 2.0}, "algorithm.arew.lam_as"),
        ({"typo": 1}, "algorithm.arew.typo"),
        ({"on_invalid": "ignore"}, "algorithm.arew.on_invalid"),
    ],
)
def test_invalid_values_name_the_key(raw, key):
    with pytest.raises(AReWConfigError, match=key.replace(".", r"\.")):
        parse_config(raw)


def test_yaml_defaults_equal_code_defaults():
    document = yaml.safe_load((CONFIG_DIR / "base" / "arew.yaml").read_text())
    assert parse_config(document["algorithm"]["arew"]) == AReWConfig()


def test_separate_lambdas():
    config = parse_config({"grouping": "separate", "lam": 0.5, "lam_bt": 2.0})
    assert config.channel_lambdas() == (0.5, 2.0)


@pytest.mark.parametrize("weighting", ["per_step", "minority_fixed", "fixed_pos", "fixed_neg", "abs_sum", "step_abs_sum"])
def test_every_weighting_parses(weighting):
    assert parse_config({"weighting": weighting}).weighting == weighting


@pytest.mark.parametrize("negatives", ["full", "prefix", "suffix"])
def test_step_abs_sum_takes_every_negatives_option(negatives):
    config = parse_config({"weighting": "step_abs_sum", "negatives": negatives})
    assert (config.weighting, config.negatives) == ("step_abs_sum", negatives)


def test_full_negatives_suit_every_weighting():
    assert parse_config({"weighting": "abs_sum", "negatives": "full"}).negatives == "full"
