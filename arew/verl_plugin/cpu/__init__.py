"""The CPU backend: verl's real trainer on a machine without an accelerator.

Selected with ``VERL_PLATFORM=cpu`` in the environment of the driver (Ray's workers inherit
it) plus the ``backend=cpu`` config group (``arew/configs/backend/cpu.yaml``: the ``hf`` rollout,
FSDP2, SDPA attention, gloo, logical Ray GPUs). ``arew smoke`` does both. The platform is
registered in every process that imports verl, from the plugin's entry point, before any
verl engine module reads the device; the rest (:mod:`verl_patches`, the ``hf`` rollout, the
FSDP engines for device "cpu") is installed only when the CPU platform is selected.
"""

from __future__ import annotations

import os
import sys

from arew.verl_plugin.cpu.platform import PLATFORM_NAME, PlatformCPU

# verl imports each checkpoint engine it ships when its workers load; this one (Ascend NPUs only) imports vLLM,
# 1-1.5 s of CPU in each of a run's half-dozen processes. On the CPU platform it is left out, and verl records it as
# unavailable, as on any machine without vLLM; the CPU backend syncs weights with verl's naive engine.
ASCEND_CHECKPOINT_ENGINE = "verl.checkpoint_engine.hccl_checkpoint_engine"

_activated = False
_activation_error: BaseException | None = None


def selected() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


def activate() -> None:
    """Install the CPU backend into verl; a failure is kept for :func:`require_ready` and re-raised."""
    global _activated, _activation_error
    if _activated:
        return
    sys.modules.setdefault(ASCEND_CHECKPOINT_ENGINE, None)  # None: verl's `import` of it raises ImportError
    try:
        from verl.workers.engine.base import EngineRegistry
        from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead
        from verl.workers.rollout.replica import RolloutReplicaRegistry

        from arew.verl_plugin.cpu import verl_patches

        verl_patches.apply()
        # verl registers its FSDP engines for devices cuda and npu only; they run unchanged on CPU with FSDP2
        for model_type, engine in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
            EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device=PLATFORM_NAME)(engine)
        RolloutReplicaRegistry.register("hf", _load_hf_replica)
        _activated = True
    except BaseException as error:
        _activation_error = error
        raise


def require_ready() -> None:
    """At trainer start-up: stop with the reason if the CPU platform is selected but the backend is not installed."""
    if selected() and _activation_error is not None:
        raise RuntimeError(f"VERL_PLATFORM=cpu, but the AReW CPU backend failed to install: {_activation_error}") from _activation_error


def _load_hf_replica():
    from arew.verl_plugin.cpu.hf_rollout import HFReplica

    return HFReplica


__all__ = ["PlatformCPU", "activate", "require_ready", "selected"]
