"""The CPU backend's pieces that need no running trainer: platform registration and the patch guard."""

import pytest
import verl
from verl.plugin.platform import PlatformRegistry

from arew.verl_plugin import cpu
from arew.verl_plugin.cpu import verl_patches
from arew.verl_plugin.cpu.platform import PlatformCPU


def test_cpu_platform_is_registered_but_never_auto_detected():
    assert PlatformRegistry.get("cpu") is PlatformCPU
    platform = PlatformCPU()
    assert not platform.is_platform_available(use_smi_check=True)
    assert platform.device_name == "cpu" and platform.communication_backend_name() == "gloo"
    assert platform.ray_resource_options(1) == {"num_gpus": 1}
    available, total = platform.device_module.mem_get_info()
    assert 0 < available <= total
    assert platform.device_module.memory_allocated() == 0 and platform.current_device() == "cpu"


def test_installed_verl_has_the_functions_the_patches_were_written_for():
    import verl.utils.model
    import verl.workers.rollout.base
    from verl.utils.distributed import initialize_global_process_group_ray

    for function in (initialize_global_process_group_ray, verl.utils.model.load_valuehead_model,
                     verl.workers.rollout.base.get_rollout_class):  # fmt: skip
        verl_patches.check(function)


def test_a_changed_verl_function_stops_the_backend_naming_the_version(monkeypatch):
    from verl.utils.distributed import initialize_global_process_group_ray

    name = "verl.utils.distributed.initialize_global_process_group_ray"
    monkeypatch.setitem(verl_patches.FINGERPRINTS, name, "0000000000000000")
    with pytest.raises(RuntimeError, match=f"verl {verl.__version__} has a different {name}"):
        verl_patches.check(initialize_global_process_group_ray)


def test_trainer_start_up_reports_a_failed_installation(monkeypatch):
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    monkeypatch.setattr(cpu, "_activation_error", RuntimeError("fingerprint mismatch"))
    with pytest.raises(RuntimeError, match="VERL_PLATFORM=cpu, but the AReW CPU backend failed to install: fingerprint mismatch"):
        cpu.require_ready()
    monkeypatch.delenv("VERL_PLATFORM")
    cpu.require_ready()  # not selected: nothing to report


@pytest.mark.e2e  # a fresh verl process (about 10 s)
def test_a_cpu_process_loads_verl_without_vllm_and_starts_its_group_without_a_rendezvous_port():
    """A fresh interpreter on the CPU platform, as each of a run's processes: loading verl's workers and agent loop
    (the plugin activating the backend) imports no vLLM, the Ascend checkpoint engine is recorded as unavailable and
    verl's naive one is there. WORLD_SIZE 1 (every CPU run): the patched start-up needs no MASTER_ADDR/MASTER_PORT, so
    no TCP port that another process could take before the store binds it (a group is process-wide)."""
    import os
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import torch.distributed as dist\n"
        "import verl.workers.engine_workers as workers\n"
        "import verl.experimental.agent_loop\n"
        "from verl.checkpoint_engine import CheckpointEngineRegistry\n"
        "print('vllm' in sys.modules, 'naive' in CheckpointEngineRegistry._registry, 'hccl_checkpoint_engine' in CheckpointEngineRegistry._import_errors)\n"
        "workers.initialize_global_process_group_ray(timeout_second=None)\n"
        "print(dist.get_backend(), dist.get_world_size(), dist.get_rank(), type(dist.distributed_c10d._get_default_store().underlying_store).__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK")} | {"WORLD_SIZE": "1", "VERL_PLATFORM": "cpu"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-7:-4] == ["False", "True", "True"]  # no vLLM; verl's naive engine; the Ascend one unavailable
    assert done.stdout.split()[-4:] == ["gloo", "1", "0", "HashStore"]
