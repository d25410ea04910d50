"""A bounded weight sync for verl's vLLM rollout: an engine that dies during a sync fails the run.

verl 0.9.1's ``ServerAdapter.update_weights`` (``verl/workers/rollout/vllm_rollout/vllm_rollout.py``)
streams the actor's weights to the vLLM worker in buckets through a ZMQ REQ socket
(``BucketedWeightSender`` in ``bucketed_weight_transfer.py``) and waits in ``socket.recv()`` for each
bucket's acknowledgement with no time limit. When the vLLM worker died mid-sync, the trainer
waited there without an error until it was killed. Here every acknowledgement has a deadline,
``actor_rollout_ref.rollout.custom.weight_sync_timeout`` seconds (verl's ``custom`` extension
point; default :data:`DEFAULT_TIMEOUT`), and a missed one raises :class:`WeightSyncTimeout` naming
the replica. The trainer selects :class:`WatchedServerAdapter` through verl's rollout registry
(``arew/verl_plugin/__init__.py``), on every platform.

A healthy acknowledgement takes the time to copy one bucket (``checkpoint_engine.update_weights_bucket_megabytes``,
2 GB by default) into the engine's weights: seconds, not minutes.
"""

from __future__ import annotations

import contextvars
from numbers import Real

import verl
import zmq
from verl.workers.rollout.vllm_rollout import vllm_rollout
from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender

from arew.engines.source_guard import require_source

SETTING = "weight_sync_timeout"
KEY = f"actor_rollout_ref.rollout.custom.{SETTING}"
DEFAULT_TIMEOUT = 300.0
# sha256 (first 16 hex digits) of the verl 0.9.1 source of each function this relies on
FINGERPRINTS = {
    "verl.workers.rollout.vllm_rollout.vllm_rollout.ServerAdapter.update_weights": "db65d1f4e062c819",
    "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer.BucketedWeightSender._init_socket": "acd9dd63022ee7d0",
}

_deadline_seconds: contextvars.ContextVar[float] = contextvars.ContextVar("arew_weight_sync_timeout", default=DEFAULT_TIMEOUT)


class WeightSyncTimeout(RuntimeError):
    """The rollout engine did not take a weight bucket in time: it died or hangs."""


def sync_timeout(custom) -> float:
    """The configured deadline per acknowledgement; a clear error naming the key for a bad value."""
    value = (custom or {}).get(SETTING, DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
        raise ValueError(f"{KEY}: seconds to wait for the rollout engine to take one weight bucket, a number > 0; got {value!r}")
    return float(value)


class WatchedWeightSender(BucketedWeightSender):
    """verl's sender whose socket gives up on a send or an acknowledgement after the deadline (``zmq.Again``)."""

    def _init_socket(self):
        super()._init_socket()
        milliseconds = max(1, round(_deadline_seconds.get() * 1000))
        self.socket.setsockopt(zmq.RCVTIMEO, milliseconds)
        self.socket.setsockopt(zmq.SNDTIMEO, milliseconds)
        self.socket.setsockopt(zmq.LINGER, 0)  # closing must not wait for an engine that is gone


class WatchedServerAdapter(vllm_rollout.ServerAdapter):
    """verl's vLLM ``ServerAdapter`` whose weight sync fails with :class:`WeightSyncTimeout` instead of hanging."""

    async def update_weights(self, weights, global_steps: int = None, wire_format: str = "named_tensors", **kwargs):
        timeout = sync_timeout(getattr(self.config, "custom", None))
        token = _deadline_seconds.set(timeout)
        try:
            return await super().update_weights(weights, global_steps=global_steps, wire_format=wire_format, **kwargs)
        except zmq.Again:
            raise WeightSyncTimeout(
                f"verl's vLLM rollout (replica {self.replica_rank}, rank {self.rollout_rank}) did not take a weight bucket "
                f"within {timeout:g} s ({KEY}): its engine has died or hangs; the vLLMHttpServer and EngineCore lines of "
                "the log say why"
            ) from None
        finally:
            _deadline_seconds.reset(token)


for _function in (vllm_rollout.ServerAdapter.update_weights, BucketedWeightSender._init_socket):
    require_source(_function, FINGERPRINTS, f"verl {verl.__version__}", "verl 0.9.1", "arew/verl_plugin/weight_sync.py")
# vllm_rollout.py builds its sender as BucketedWeightSender(...) from its module globals (full and delta syncs)
vllm_rollout.BucketedWeightSender = WatchedWeightSender
