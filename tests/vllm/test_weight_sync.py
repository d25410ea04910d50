"""The bounded weight sync (arew.verl_plugin.weight_sync) through verl's own sender and ServerAdapter code:
an engine that never answers, or answers the handshake and then dies, fails the sync in bounded time."""

from __future__ import annotations

import threading
import time

import pytest
import torch
import zmq
from verl.workers.config import RolloutConfig

from arew.verl_plugin import weight_sync
from arew.verl_plugin.weight_sync import KEY, WatchedServerAdapter, WatchedWeightSender, WeightSyncTimeout, sync_timeout

pytestmark = pytest.mark.vllm

WEIGHTS = [("layer.weight", torch.ones(8, 8)), ("layer.bias", torch.zeros(8))]


@pytest.fixture(autouse=True)
def cpu_device(monkeypatch):
    """The sender's buffers and cache calls on the CPU platform's device module, as in a VERL_PLATFORM=cpu worker."""
    from verl.workers.rollout.vllm_rollout import bucketed_weight_transfer

    from arew.verl_plugin.cpu.platform import PlatformCPU

    monkeypatch.setattr(bucketed_weight_transfer, "get_torch_device", lambda: PlatformCPU().device_module)


def test_the_timeout_comes_from_rollout_custom_and_bad_values_name_the_key():
    assert sync_timeout(None) == weight_sync.DEFAULT_TIMEOUT
    assert sync_timeout({"weight_sync_timeout": 7}) == 7.0
    for bad in (0, -1, "10", True, None):
        with pytest.raises(ValueError, match=KEY.replace(".", r"\.")):
            sync_timeout({"weight_sync_timeout": bad})


def test_the_plugin_selects_the_watched_adapter_for_vllm():
    from verl.workers.rollout.base import get_rollout_class

    assert get_rollout_class("vllm", "async") is WatchedServerAdapter


def _answer_handshake_then_die(handle: str, ready: threading.Event) -> None:
    """An engine that takes the buffer handshake and dies before the first bucket's acknowledgement."""
    socket = zmq.Context.instance().socket(zmq.REP)
    socket.connect(handle)
    ready.set()
    socket.recv_pyobj()
    socket.send(b"")
    socket.close(linger=0)


async def _send(handle: str, seconds: float) -> float:
    token = weight_sync._deadline_seconds.set(seconds)
    started = time.monotonic()
    try:
        await WatchedWeightSender(zmq_handle=handle, bucket_size_mb=1, use_shm=True).async_send_weights(iter(WEIGHTS))
    finally:
        weight_sync._deadline_seconds.reset(token)
    return time.monotonic() - started


async def test_a_sender_with_no_engine_gives_up_after_the_deadline(tmp_path):
    with pytest.raises(zmq.Again):
        await _send(f"ipc://{tmp_path}/sync.sock", 0.3)


async def test_an_engine_that_dies_after_the_handshake_fails_the_sync(tmp_path):
    handle = f"ipc://{tmp_path}/sync.sock"
    ready = threading.Event()
    engine = threading.Thread(target=_answer_handshake_then_die, args=(handle, ready), daemon=True)
    engine.start()
    with pytest.raises(zmq.Again):
        await _send(handle, 0.5)
    engine.join(timeout=10)
    assert ready.is_set() and not engine.is_alive()  # it did take the handshake: the bucket's acknowledgement timed out


async def test_the_adapter_names_the_replica_and_the_key(tmp_path):
    """verl's own ServerAdapter.update_weights (as the trainer calls it), with no engine behind the socket."""
    adapter = object.__new__(WatchedServerAdapter)
    adapter.config = RolloutConfig(custom={"weight_sync_timeout": 0.3})
    adapter.replica_rank, adapter.rollout_rank, adapter._has_server = 0, 0, False
    adapter.zmq_handle, adapter.use_shm, adapter.server_handle = f"ipc://{tmp_path}/sync.sock", True, None
    with pytest.raises(WeightSyncTimeout, match=r"replica 0.*0\.3 s \(actor_rollout_ref\.rollout\.custom\.weight_sync_timeout\)"):
        await adapter.update_weights(iter(WEIGHTS), global_steps=1)
