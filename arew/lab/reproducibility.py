"""The same lab numbers on every x86-64 machine of one CPU vendor: each numeric library's code path pinned.

A lab run is deterministic on one machine (one torch thread, every draw seeded). Across
machines the arithmetic is not: ATen picks AVX-512 or AVX2 kernels, MKL and oneDNN choose their
code paths by CPU, numpy dispatches AVX-512 loops where it can, and each rounds in its own way.
Sampling turns a last-bit difference into another trajectory within a few steps (measured: one
ppo-ir run under ATen's AVX-512 and AVX2 kernels differs in the policy's entropy from step 1);
the published ppo-ir reward once read 0.871 on one 2-core machine and 0.855 on another.

The lab trains in worker processes started with :data:`PINNED_ENVIRONMENT`, which caps torch's
kernels and numpy's loops at AVX2 (every x86-64 server and laptop of the last decade has it),
puts MKL on its COMPATIBLE branch (SSE2: MKL promises the same results from its AVX2 branch on
Intel CPUs only, and the lab's matrices are too small for the branch to matter for speed) and
uses one thread. Libraries read these when they initialise (numpy reads its CPU features at
import), so they are set for a fresh process, never changed in a running one. Results still differ on other architectures (ARM) and with other
versions of torch, MKL or numpy, and, with these pins, between Intel and AMD processors: a ppo-ir run on an AMD
EPYC (Zen 4) parts from the same run on an Intel CPU (what in the arithmetic differs is not found yet: not
OpenBLAS's kernel choice, pinning it changed nothing). Each run records its CPU's vendor
(:func:`cpu_vendor`), and a reproduction is checked against a run of the same vendor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_NUMPY_AVX512 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"

PINNED_ENVIRONMENT: Mapping[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own kernels
    "MKL_CBWR": "COMPATIBLE,STRICT",  # MKL's conditional numerical reproducibility, the branch for Intel and other CPUs alike
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (torch's mkldnn kernels)
    "NPY_DISABLE_CPU_FEATURES": _NUMPY_AVX512,  # numpy's dispatched loops; features a CPU lacks are ignored
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def cpu_vendor() -> str:
    """The processor's vendor as the CPU names itself (``GenuineIntel``, ``AuthenticAMD``), else the machine type."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.machine() or "unknown"


def arithmetic() -> dict[str, str]:
    """What this process computes with: torch's kernel level, whether numpy may use AVX-512, MKL's branch, the CPU's
    vendor, the versions."""
    import numpy
    import torch
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    numpy_avx512 = "AVX512F" in __cpu_dispatch__ and __cpu_features__.get("AVX512F", False)
    return {
        "aten": torch.backends.cpu.get_cpu_capability(),
        "numpy_avx512": "yes" if numpy_avx512 else "no",
        "mkl_cbwr": os.environ.get("MKL_CBWR", "unset"),
        "cpu_vendor": cpu_vendor(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }


def pinned_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the lab's pins in place."""
    return {**(os.environ if base is None else base), **PINNED_ENVIRONMENT}


def is_pinned(environment: Mapping[str, str] | None = None) -> bool:
    environment = os.environ if environment is None else environment
    return all(environment.get(key) == value for key, value in PINNED_ENVIRONMENT.items())
