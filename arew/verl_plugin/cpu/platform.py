"""verl's platform interface for a machine without an accelerator.

verl 0.9.1 registers only CUDA, NPU and ROCm platforms and falls back to "nvidia" when none is
found. This one is selected only explicitly (``VERL_PLATFORM=cpu``), never by auto-detection,
so installing the plugin changes nothing on GPU nodes. Ray still schedules verl's workers on
"GPU" resources: the CPU backend asks Ray for logical GPUs (``ray_init.num_gpus``).
"""

from __future__ import annotations

import types
from contextlib import contextmanager

import psutil
import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

PLATFORM_NAME = "cpu"


def _noop(*args, **kwargs):
    return None


def _memory_info(device=None) -> tuple[int, int]:
    memory = psutil.virtual_memory()
    return memory.available, memory.total


def _build_device_module() -> types.ModuleType:
    """``torch.cpu`` plus the ``torch.cuda`` calls verl makes on its device module (memory, RNG, caches)."""
    module = types.ModuleType("arew_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("_"):
            setattr(module, name, getattr(torch.cpu, name))
    zero = lambda *args, **kwargs: 0  # noqa: E731  (no device memory to report)
    module.__dict__.update(
        empty_cache=_noop,
        ipc_collect=_noop,
        reset_peak_memory_stats=_noop,
        set_per_process_memory_fraction=_noop,
        memory_allocated=zero,
        max_memory_allocated=zero,
        memory_reserved=zero,
        max_memory_reserved=zero,
        mem_get_info=_memory_info,
        get_rng_state=lambda device=None: torch.get_rng_state(),
        set_rng_state=lambda state, device=None: torch.set_rng_state(state),
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        get_device_name=lambda device=None: "cpu",
        current_device=lambda: "cpu",
        device_count=lambda: 1,
    )
    return module


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """Everything runs on the host; collectives go through gloo."""

    _device_module = _build_device_module()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return self._device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        return False  # only VERL_PLATFORM=cpu selects it

    def current_device(self):
        return "cpu"  # verl moves tensors with .to(get_device_id()); an index would mean cuda:N

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index) -> None:
        return None

    def synchronize(self, device_index=None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # what Ray sets for the logical GPUs it hands out

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None
