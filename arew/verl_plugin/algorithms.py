"""verl's own advantage estimators, policy and value losses and actor config, for the CPU lab, which runs them
outside verl's trainer. Imported through the plugin package, so a lab worker's first import of verl is the
package's, without verl's import-time notices (:mod:`arew.verl_plugin`)."""

from __future__ import annotations

import verl
from verl.trainer.ppo import core_algos
from verl.workers.config.actor import ActorConfig

VERL_VERSION = verl.__version__

__all__ = ["VERL_VERSION", "ActorConfig", "core_algos"]
