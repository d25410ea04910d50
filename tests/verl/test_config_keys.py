"""Every documented key of ``algorithm.arew``, ``arew_agent``, ``arew_rollouts`` and ``arew_user_service`` rejects invalid values at start-up, naming itself."""

import math

import pytest
from omegaconf import OmegaConf

from arew.configs import CONFIG_DIR
from arew.core import parse_config
from arew.metrics.rollouts import RolloutSettings
from arew.serving.spec import ServiceSettings
from arew.verl_plugin.agent_loop import AgentLoopSettings

CONFIG = OmegaConf.load(CONFIG_DIR / "base" / "arew.yaml")
DEFAULTS = OmegaConf.to_container(CONFIG)
INVALID = ["bogus", ["as"], {"a": 1}, math.nan, math.inf, -1, 2.5, True, None, ""]


def _leaves(section, prefix=""):
    for key, value in section.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _with(section, dotted, value):
    raw = OmegaConf.to_container(OmegaConf.create(section))
    node = raw
    *parents, leaf = dotted.split(".")
    for name in parents:
        node = node[name]
    node[leaf] = value
    return raw


def _check_key(parse, section, prefix, key):
    rejected = 0
    for value in INVALID:
        try:
            parse(_with(section, key, value))
        except ValueError as error:  # the only error type start-up may raise
            assert f"{prefix}.{key}" in str(error), (value, str(error))
            rejected += 1
    assert rejected >= 3, f"{prefix}.{key} accepted almost anything"


@pytest.mark.parametrize("key", list(_leaves(DEFAULTS["algorithm"]["arew"])))
def test_algorithm_arew_keys(key):
    _check_key(parse_config, DEFAULTS["algorithm"]["arew"], "algorithm.arew", key)


@pytest.mark.parametrize("key", [k for k in _leaves(DEFAULTS["arew_agent"])])
def test_arew_agent_keys(key):
    _check_key(AgentLoopSettings.from_config, DEFAULTS["arew_agent"], "arew_agent", key)


@pytest.mark.parametrize("key", list(_leaves(DEFAULTS["arew_rollouts"])))
def test_arew_rollouts_keys(key):
    _check_key(RolloutSettings.from_config, DEFAULTS["arew_rollouts"], "arew_rollouts", key)
    assert RolloutSettings.from_config(DEFAULTS["arew_rollouts"]) == RolloutSettings()  # the yaml's defaults are the class's


@pytest.mark.parametrize("key", list(_leaves(DEFAULTS["arew_user_service"])))
def test_arew_user_service_keys(key, monkeypatch):
    for variable in ("AREW_USER_SERVICE", "AREW_USER_SERVER_CMD"):  # the section's ${oc.env:...} defaults
        monkeypatch.delenv(variable, raising=False)
    section = OmegaConf.to_container(CONFIG["arew_user_service"], resolve=True)
    _check_key(ServiceSettings.from_config, section, "arew_user_service", key)


def test_sub_sections_must_be_mappings():
    for section in ("schedule", "noise", "window"):
        for value in (5, [], "x"):
            with pytest.raises(ValueError, match=f"algorithm.arew.{section}: expected a mapping"):
                parse_config({section: value})
