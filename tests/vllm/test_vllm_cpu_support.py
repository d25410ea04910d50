"""What vLLM's CPU build needs inside verl (arew/engines/vllm_cpu.py, +backend=cpu_vllm), checked against the installed
vLLM and verl without starting an engine."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from arew.engines import vllm_cpu
from arew.verl_plugin.smoke import CONFIG_DIR
from arew.verl_plugin.trainer import validate_arew_setup

pytestmark = pytest.mark.vllm


def test_verl_sees_the_cpu_build_as_vllm_and_vllm_stays_on_its_cpu_platform():
    import verl.third_party.vllm
    from vllm.platforms import current_platform

    cpu_version = importlib.metadata.version("vllm-cpu")
    assert importlib.metadata.version("vllm") == f"{cpu_version}+cpu"
    assert verl.third_party.vllm.vllm_version == f"{cpu_version}+cpu"  # verl would refuse its vLLM rollout with None
    assert current_platform.is_cpu()
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("no-such-distribution")  # the alias answers for vllm only


def _packed_layer(method) -> torch.nn.Module:
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(torch.randn(64, 64), requires_grad=False)
    layer.bias = None
    method(None, layer)
    return layer


def test_the_plugin_keeps_the_linear_weight_that_vllm_cpu_drops_and_packs_new_weights_on_reload(monkeypatch):
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod

    original = UnquantizedLinearMethod.process_weights_after_loading
    assert _packed_layer(original).weight.numel() == 0  # vLLM's own method: nothing left for verl's weight sync
    monkeypatch.setattr(UnquantizedLinearMethod, "process_weights_after_loading", original)
    monkeypatch.delenv("VERL_PLATFORM", raising=False)
    vllm_cpu.register()
    assert UnquantizedLinearMethod.process_weights_after_loading is original  # only under the AReW CPU backend
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    vllm_cpu.register()
    kept = UnquantizedLinearMethod.process_weights_after_loading
    assert kept is not original
    layer = _packed_layer(kept)
    x = torch.randn(3, 64)
    assert layer.weight.shape == (64, 64)
    torch.testing.assert_close(layer.cpu_linear(x, layer.weight, None), x @ layer.weight.T, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(64, 64))  # what a weight sync does, then verl calls the method again
    kept(None, layer)
    torch.testing.assert_close(layer.cpu_linear(x, layer.weight, None), x @ layer.weight.T, rtol=1e-4, atol=1e-4)


def test_a_changed_vllm_method_stops_the_plugin_naming_the_version(monkeypatch):
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod

    name = "vllm.model_executor.layers.linear.UnquantizedLinearMethod.process_weights_after_loading"
    vllm_cpu.check(UnquantizedLinearMethod.process_weights_after_loading)
    monkeypatch.setitem(vllm_cpu.FINGERPRINTS, name, "0000000000000000")
    with pytest.raises(RuntimeError, match=f"vllm-cpu {importlib.metadata.version('vllm-cpu')} has a different {name}"):
        vllm_cpu.check(UnquantizedLinearMethod.process_weights_after_loading)


def _recipe(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose("recipe", overrides=["task=pe-g-s2", "algo=grpo", *overrides])


def test_the_cpu_vllm_backend_passes_start_up_and_sleep_mode_is_refused_naming_the_key(monkeypatch):
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    config = _recipe("+backend=cpu_vllm")
    rollout = config.actor_rollout_ref.rollout
    assert rollout.name == "vllm" and rollout.enable_sleep_mode is False and rollout.free_cache_engine is False
    validate_arew_setup(config)
    for override, key in (("actor_rollout_ref.rollout.free_cache_engine=true", "free_cache_engine"),
                          ("actor_rollout_ref.rollout.enable_sleep_mode=true", "enable_sleep_mode")):  # fmt: skip
        with pytest.raises(ValueError, match=f"actor_rollout_ref.rollout.{key}: vLLM's CPU build has no sleep mode"):
            validate_arew_setup(_recipe("+backend=cpu_vllm", override))
    plain = _recipe("+backend=cpu", "actor_rollout_ref.rollout.name=vllm")  # verl's default: sleep mode on
    with pytest.raises(ValueError, match="enable_sleep_mode"):
        validate_arew_setup(plain)
    bad = OmegaConf.merge(config, {"actor_rollout_ref": {"rollout": {"custom": {"weight_sync_timeout": 0}}}})
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.rollout\.custom\.weight_sync_timeout"):
        validate_arew_setup(bad)
