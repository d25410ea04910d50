"""Config validation names the key; the documented YAML defaults are the code's defaults."""

from pathlib import Path

import pytest
import yaml

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
    document = yaml.safe_load((ROOT / "configs" / "base" / "arew.yaml").read_text())
    assert parse_config(document["algorithm"]["arew"]) == AReWConfig()


def test_separate_lambdas():
    config = parse_config({"grouping": "separate", "lam": 0.5, "lam_bt": 2.0})
    assert config.channel_lambdas() == (0.5, 2.0)
