"""Every change the CPU backend makes to verl 0.9.1 internals, in one place.

Each patch names the verl line it replaces and why. Before patching, :func:`apply` compares
the source of every verl function a patch replaces or relies on with its fingerprint in
verl 0.9.1 and refuses to run, naming the installed verl version, if one differs.
"""

from __future__ import annotations

import os
from datetime import timedelta

import verl

from arew.engines.source_guard import require_source

# sha256 (first 16 hex digits) of the verl 0.9.1 source of each function a patch depends on
FINGERPRINTS = {
    "verl.utils.distributed.initialize_global_process_group_ray": "761a94d1a2e058d3",
    "verl.utils.model.load_valuehead_model": "2371ca280654b53b",
    "verl.workers.rollout.base.get_rollout_class": "d0be5827f1214f04",
    "verl.workers.engine.fsdp.transformer_impl.FSDPEngine._build_fsdp_module": "35b7b539858443e4",
}


def check(function) -> None:
    require_source(function, FINGERPRINTS, f"verl {verl.__version__}", "verl 0.9.1", "arew/verl_plugin/cpu/verl_patches.py")


def _load_value_model(local_path, torch_dtype, model_config, trust_remote_code):
    """Critic model with a one-logit token-classification head, on SDPA attention."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(
        local_path,
        torch_dtype=torch_dtype,
        config=model_config,
        attn_implementation="sdpa",
        trust_remote_code=trust_remote_code,
    )


def _unpinned_offload_policy(pin_memory: bool = True):
    """FSDP2's CPU offload policy without pinned memory (pinning needs an accelerator)."""
    from torch.distributed.fsdp import CPUOffloadPolicy

    return CPUOffloadPolicy(pin_memory=False)


def apply() -> None:
    import verl.utils.model
    import verl.workers.engine.fsdp.transformer_impl
    import verl.workers.engine_workers
    import verl.workers.rollout.base
    from verl.utils.distributed import initialize_global_process_group_ray

    for function in (
        initialize_global_process_group_ray,
        verl.utils.model.load_valuehead_model,
        verl.workers.rollout.base.get_rollout_class,
        verl.workers.engine.fsdp.transformer_impl.FSDPEngine._build_fsdp_module,
    ):
        check(function)

    def init_gloo_process_group(timeout_second=None, backend=None):
        import torch.distributed

        if int(os.environ.get("WORLD_SIZE", 1)) == 1 and not torch.distributed.is_initialized():
            # one process needs no rendezvous: an in-process store, no TCP port that another process can take
            # between verl choosing it and the store binding it (seen: EADDRINUSE under load)
            timeout = timedelta(seconds=timeout_second) if timeout_second is not None else None
            torch.distributed.init_process_group(
                backend=backend or "gloo", store=torch.distributed.HashStore(), rank=0, world_size=1, timeout=timeout
            )
            return None
        return initialize_global_process_group_ray(timeout_second=timeout_second, backend=backend or "gloo")

    # verl/workers/engine_workers.py:89 calls initialize_global_process_group_ray(), whose default backend
    # f"cpu:gloo,{device}:{nccl}" is "cpu:gloo,cpu:gloo" on this platform, which torch rejects: use plain gloo.
    verl.workers.engine_workers.initialize_global_process_group_ray = init_gloo_process_group
    # verl/utils/model.py:649,674 (load_valuehead_model) hard-code attn_implementation="flash_attention_2"
    # (CUDA only, no config key); the critic is loaded with SDPA instead.
    verl.utils.model.load_valuehead_model = _load_value_model
    # verl/workers/rollout/base.py:89 (_ROLLOUT_REGISTRY) lists vllm/sglang/trtllm and has no register
    # function; get_rollout_class reads it to build the training worker's rollout adapter.
    verl.workers.rollout.base._ROLLOUT_REGISTRY[("hf", "async")] = "arew.verl_plugin.cpu.hf_rollout.HFServerAdapter"
    # verl/workers/engine/fsdp/transformer_impl.py:462 gives every forward-only FSDP2 engine (the reference
    # policy of a KL loss) CPUOffloadPolicy(pin_memory=True); pinning raises without an accelerator.
    verl.workers.engine.fsdp.transformer_impl.CPUOffloadPolicy = _unpinned_offload_policy
